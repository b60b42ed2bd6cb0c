//! [`VectorDimensionCheck`]: an `INSERT` of a literal vector with the wrong
//! dimension fails naming the column, before DataFusion's constant folding
//! reports an anonymous cast error.

use crate::error::fail;
use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{DmlStatement, Expr, LogicalPlan, WriteOp};
use datafusion::optimizer::AnalyzerRule;

/// Checks the dimension of literal vectors inserted into fixed-size-list
/// columns (`INSERT INTO t VALUES (1, [0.1, 0.2])`).
#[derive(Debug, Default)]
pub(crate) struct VectorDimensionCheck {}

impl AnalyzerRule for VectorDimensionCheck {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DFResult<LogicalPlan> {
        plan.apply(|node| {
            if let LogicalPlan::Dml(dml) = node
                && matches!(dml.op, WriteOp::Insert(_) | WriteOp::Update)
            {
                check_insert(dml)?;
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "lance_vector_dimension_check"
    }
}

fn strip(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(a) => strip(&a.expr),
        Expr::Cast(c) => strip(&c.expr),
        Expr::TryCast(c) => strip(&c.expr),
        e => e,
    }
}

/// The number of elements of a literal list expression, if it is one.
fn literal_len(expr: &Expr) -> Option<usize> {
    match strip(expr) {
        Expr::Literal(ScalarValue::List(a), _) if a.len() == 1 && !a.is_null(0) => {
            Some(a.value_length(0) as usize)
        }
        Expr::Literal(ScalarValue::LargeList(a), _) if a.len() == 1 && !a.is_null(0) => {
            Some(a.value_length(0) as usize)
        }
        Expr::Literal(ScalarValue::FixedSizeList(a), _) if a.len() == 1 && !a.is_null(0) => {
            Some(a.value_length() as usize)
        }
        Expr::ScalarFunction(f) if f.name() == "make_array" => Some(f.args.len()),
        _ => None,
    }
}

fn check_insert(dml: &DmlStatement) -> DFResult<()> {
    let table = dml.target.schema();
    let LogicalPlan::Projection(projection) = dml.input.as_ref() else {
        return Ok(());
    };
    for (expr, field) in projection.expr.iter().zip(projection.schema.fields()) {
        let Ok(column) = table.field_with_name(field.name()) else {
            continue;
        };
        let DataType::FixedSizeList(_, dimension) = column.data_type() else {
            continue;
        };
        let dimension = *dimension as usize;
        // The values feeding this column: the expression itself, or the
        // matching column of a VALUES list below the projection.
        let mut candidates: Vec<&Expr> = vec![expr];
        if let (Expr::Column(c), LogicalPlan::Values(values)) =
            (strip(expr), projection.input.as_ref())
            && let Ok(i) = values.schema.index_of_column(c)
        {
            candidates = values.values.iter().filter_map(|row| row.get(i)).collect();
        }
        for (row, value) in candidates.into_iter().enumerate() {
            if let Some(len) = literal_len(value)
                && len != dimension
            {
                return fail!(
                    schema_mismatch,
                    "column '{}' of table '{}' is a vector of dimension {dimension}, \
                     but the value in row {} has {len} elements",
                    column.name(),
                    dml.table_name,
                    row + 1
                );
            }
        }
    }
    Ok(())
}
