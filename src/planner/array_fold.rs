//! [`FoldNumberArrays`]: an array of number literals (`[0.1, 0.2, ...]` in
//! SQL, planned as `make_array` of one literal per element) becomes the list
//! literal DataFusion's simplifier would fold it to, before the rest of the
//! analysis and optimisation.
//!
//! A 64-dimension query vector in `ORDER BY l2_distance(emb, [...])` is a
//! `make_array` of 64 arguments that every later rule walks, types and
//! names, several times, until the simplifier folds it; folded first, they
//! see one literal. The result is the optimizer's own: the same list value
//! and type (elements of the literals' one type, nullable, DataFusion's
//! `item` field), and every projected name kept as DataFusion generated it
//! (`make_array(Float64(0.1),...)`). Arrays whose elements differ in type,
//! contain NULLs or anything but literals are left to DataFusion.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::functions_nested::make_array::MakeArray;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;
use datafusion::optimizer::utils::NamePreserver;

/// Folds arrays of number literals of one type to list literals.
#[derive(Debug, Default)]
pub(crate) struct FoldNumberArrays {}

/// The rule, as the analyzer holds it.
pub(crate) fn fold_number_arrays() -> Arc<dyn AnalyzerRule + Send + Sync> {
    Arc::new(FoldNumberArrays::default())
}

impl AnalyzerRule for FoldNumberArrays {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DFResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let mut found = false;
            node.apply_expressions(|e| {
                found = has_number_array(e);
                Ok(if found {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })?;
            if !found {
                return Ok(Transformed::no(node));
            }
            let names = NamePreserver::new(&node);
            node.map_expressions(|expr| {
                if !has_number_array(&expr) {
                    return Ok(Transformed::no(expr));
                }
                let name = names.save(&expr);
                Ok(expr.transform_up(fold)?.update_data(|e| name.restore(e)))
            })
        })
        .data()
    }

    fn name(&self) -> &str {
        "lance_fold_number_arrays"
    }
}

fn has_number_array(expr: &Expr) -> bool {
    expr.exists(|e| Ok(number_literals(e).is_some()))
        .unwrap_or(false)
}

/// The literals of DataFusion's `make_array(<number literal>, ...)` when
/// they share one type.
fn number_literals(expr: &Expr) -> Option<&[Expr]> {
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    if !call.func.inner().is::<MakeArray>() {
        return None;
    }
    let kind = match call.args.first()? {
        Expr::Literal(value, None) => value.data_type(),
        _ => return None,
    };
    let number = kind.is_integer() || kind.is_floating();
    let same = |arg: &Expr| matches!(arg, Expr::Literal(value, None) if !value.is_null() && value.data_type() == kind);
    (number && call.args.iter().all(same)).then_some(call.args.as_slice())
}

/// The elements of [`number_literals`].
fn number_elements(expr: &Expr) -> Option<Vec<ScalarValue>> {
    let values = number_literals(expr)?.iter().filter_map(|arg| match arg {
        Expr::Literal(value, _) => Some(value.clone()),
        _ => None,
    });
    Some(values.collect())
}

fn fold(expr: Expr) -> DFResult<Transformed<Expr>> {
    let Some(values) = number_elements(&expr) else {
        return Ok(Transformed::no(expr));
    };
    let kind = values[0].data_type();
    let list = ScalarValue::new_list_nullable(&values, &kind);
    Ok(Transformed::yes(Expr::Literal(
        ScalarValue::List(list),
        None,
    )))
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    use super::*;

    /// The folded literal is the one DataFusion's simplifier makes of the
    /// same array: equal values and types.
    #[tokio::test]
    async fn the_fold_is_the_simplifiers() {
        let ctx = SessionContext::new();
        for sql in ["SELECT [1.5, -2.25, 3.0]", "SELECT [1, 2, -3]"] {
            let plan = ctx.state().create_logical_plan(sql).await.unwrap();
            let LogicalPlan::Projection(projection) = &plan else {
                panic!("{sql}: {plan}");
            };
            let ours = fold(projection.expr[0].clone()).unwrap();
            assert!(ours.transformed, "{sql}");
            let theirs = ctx.state().optimize(&plan).unwrap();
            let LogicalPlan::Projection(folded) = &theirs else {
                panic!("{sql}: {theirs}");
            };
            let Expr::Alias(alias) = &folded.expr[0] else {
                panic!("{sql}: {}", folded.expr[0]);
            };
            assert_eq!(ours.data, *alias.expr, "{sql}");
        }
        // A context with the rule answers as DataFusion's own does: the same
        // column names and values.
        let sql = "SELECT [1.5, -2.5], array_length([1, 2, 3]) AS n, [1, 2.5] \
                   FROM (VALUES (1)) WHERE array_has([1, 2], column1)";
        let lance = crate::lance_session_context(Default::default());
        let (ours, theirs) = (lance.sql(sql).await.unwrap(), ctx.sql(sql).await.unwrap());
        assert_eq!(ours.schema(), theirs.schema());
        assert_eq!(
            ours.schema().field(0).name(),
            "make_array(Float64(1.5),Float64(-2.5))"
        );
        let (ours, theirs) = (
            ours.collect().await.unwrap(),
            theirs.collect().await.unwrap(),
        );
        assert_eq!(ours, theirs);
        assert_eq!(ours[0].num_rows(), 1);
        // Mixed types, NULLs and non-literals stay as they are.
        for sql in [
            "SELECT [1, 2.5]",
            "SELECT [1, NULL]",
            "SELECT [1, random()]",
        ] {
            let plan = ctx.state().create_logical_plan(sql).await.unwrap();
            let LogicalPlan::Projection(projection) = &plan else {
                panic!("{sql}: {plan}");
            };
            assert!(
                !fold(projection.expr[0].clone()).unwrap().transformed,
                "{sql}"
            );
        }
    }
}
