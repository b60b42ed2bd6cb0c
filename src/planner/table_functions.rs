//! [`LanceFunctionPlanner`]: this crate's table functions in `FROM`,
//! planned as DataFusion plans table functions, with two differences.
//!
//! * **Each call is a relation of its own.** DataFusion names every
//!   table-function scan `f()` and tells scans apart by name alone, so two
//!   calls with different arguments in one statement
//!   (`(SELECT count(*) FROM lance_versions('a')), (SELECT count(*) FROM
//!   lance_versions('b'))`) would be taken for one (uncorrelated scalar
//!   subqueries are planned once per distinct plan). The scan is named by
//!   the call as written (`lance_versions('a')`); its columns keep the name
//!   `f()` (or the alias).
//! * **Vector literals are not folded.** DataFusion plans a table
//!   function's arguments as expressions and folds them to constants:
//!   `[0.1, 0.2, ...]` becomes a `make_array` of one literal per dimension,
//!   evaluated by the simplifier — about 0.25 ms at 64 dimensions, a tenth
//!   of an indexed search. The query vector of `lance_vector_search` given
//!   as an array of number literals (in parentheses or not: an `EXECUTE`
//!   hands its value over parenthesized) is read straight from the syntax tree as
//!   DataFusion would type its numbers (integers as `Int64` — exact in `f64`
//!   below 2⁵³ —, the rest as `f64`) and handed to the function as a list
//!   literal. Any other form (a subquery, an expression,
//!   `sql_parser.parse_float_as_decimal`) is planned by DataFusion.
//!
//! A call with a clause on the reference (`VERSION AS OF`, hints) or named
//! arguments is left to DataFusion, which reports its own error.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::ListArray;
use datafusion::arrow::datatypes::Float64Type;
use datafusion::common::{DFSchema, ScalarValue, TableReference};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, TableFactor, TableFunctionArgs, UnaryOperator, Value,
    visit_expressions_mut,
};

use crate::location::redact_uri;
use crate::udtf::{VECTOR_SEARCH_FUNCTION_NAME, function_names};

/// The argument position of `lance_vector_search`'s query vector.
const VECTOR_ARGUMENT: usize = 2;

/// Plans calls of this crate's table functions (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct LanceFunctionPlanner {}

impl RelationPlanner for LanceFunctionPlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> DFResult<RelationPlanning> {
        let Some((function, args)) = call(&relation) else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let fold_floats = !context
            .context_provider()
            .options()
            .sql_parser
            .parse_float_as_decimal;
        let mut exprs = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            let literal =
                (function == VECTOR_SEARCH_FUNCTION_NAME && i == VECTOR_ARGUMENT && fold_floats)
                    .then(|| vector(arg))
                    .flatten();
            exprs.push(match literal {
                Some(v) => Expr::Literal(v, None),
                None => context.sql_expr_to_logical_expr((*arg).clone(), &DFSchema::empty())?,
            });
        }
        let source = context
            .context_provider()
            .get_table_function_source(function, exprs)?;
        let TableFactor::Table { alias, .. } = &relation else {
            unreachable!("call matched a table function");
        };
        let plan = LogicalPlanBuilder::scan(scan_name(&relation), source, None)?
            .alias(TableReference::bare(format!("{function}()")))?
            .build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan,
            alias.clone(),
        ))))
    }
}

/// The name of a call's scan: the call as written, without its alias, with
/// credentials removed from every string in it (locations may hold them;
/// plans and `EXPLAIN` never show them).
fn scan_name(relation: &TableFactor) -> TableReference {
    // Most calls have no alias and no string that could be a URL (no
    // `:`): their text as written, with no copy of the call (a query
    // vector may be long).
    if matches!(relation, TableFactor::Table { alias: None, .. }) {
        let text = relation.to_string();
        if !text.contains(':') {
            return TableReference::bare(text);
        }
    }
    let mut call = relation.clone();
    if let TableFactor::Table { alias, .. } = &mut call {
        *alias = None;
    }
    let _ = visit_expressions_mut(&mut call, |expr| {
        if let ast::Expr::Value(value) = expr
            && let Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) = &mut value.value
        {
            *s = redact_uri(s);
        }
        ControlFlow::<()>::Continue(())
    });
    TableReference::bare(call.to_string())
}

/// The function and arguments of a call of one of this crate's table
/// functions, named as DataFusion looks it up, with no clause on the
/// reference and only positional arguments.
fn call(relation: &TableFactor) -> Option<(&'static str, Vec<&ast::Expr>)> {
    let TableFactor::Table {
        name,
        args: Some(TableFunctionArgs {
            args,
            settings: None,
        }),
        with_hints,
        version: None,
        with_ordinality: false,
        partitions,
        json_path: None,
        sample: None,
        index_hints,
        ..
    } = relation
    else {
        return None;
    };
    let [part] = name.0.as_slice() else {
        return None;
    };
    // DataFusion looks the function up by the identifier as written.
    let written = part.as_ident()?.to_string();
    let function = function_names().into_iter().find(|f| *f == written)?;
    if !with_hints.is_empty() || !partitions.is_empty() || !index_hints.is_empty() {
        return None;
    }
    let args = args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((function, args))
}

/// A non-empty array of number literals, in parentheses or not (an
/// `EXECUTE`'s value comes parenthesized), as a `List<Float64>` literal.
fn vector(expr: &ast::Expr) -> Option<ScalarValue> {
    let mut expr = expr;
    while let ast::Expr::Nested(inner) = expr {
        expr = inner;
    }
    let ast::Expr::Array(ast::Array { elem, .. }) = expr else {
        return None;
    };
    if elem.is_empty() {
        return None;
    }
    let values = elem.iter().map(number).collect::<Option<Vec<f64>>>()?;
    let list =
        ListArray::from_iter_primitive::<Float64Type, _, _>([Some(values.into_iter().map(Some))]);
    Some(ScalarValue::List(Arc::new(list)))
}

/// A number literal, optionally signed, as DataFusion reads it (see the
/// module docs); `None` for anything else.
fn number(expr: &ast::Expr) -> Option<f64> {
    let (negative, expr) = match expr {
        ast::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => (true, expr.as_ref()),
        other => (false, other),
    };
    let ast::Expr::Value(value) = expr else {
        return None;
    };
    let Value::Number(digits, false) = &value.value else {
        return None;
    };
    let signed = if negative {
        format!("-{digits}")
    } else {
        digits.clone()
    };
    if let Ok(n) = signed.parse::<i64>() {
        return (n.unsigned_abs() < 1 << 53).then_some(n as f64);
    }
    if !negative && digits.parse::<u64>().is_ok() {
        return None;
    }
    signed.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Float64Array;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn parse(sql: &str) -> ast::Expr {
        Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_expr()
            .unwrap()
    }

    #[test]
    fn numbers_read_as_datafusion_types_them() {
        assert_eq!(number(&parse("3")), Some(3.0));
        assert_eq!(number(&parse("-3")), Some(-3.0));
        assert_eq!(number(&parse("0.1")), Some(0.1));
        assert_eq!(number(&parse("-2.5e-3")), Some(-2.5e-3));
        assert_eq!(number(&parse("1E3")), Some(1000.0));
        // Integers beyond f64's exact range, unsigned ones and anything
        // other than a number literal go to DataFusion.
        assert_eq!(number(&parse("9007199254740993")), None);
        assert_eq!(number(&parse("18446744073709551615")), None);
        assert_eq!(number(&parse("'1'")), None);
        assert_eq!(number(&parse("1 + 1")), None);
        assert_eq!(number(&parse("- -1")), None);
        assert!(vector(&parse("[]")).is_none());
        assert!(vector(&parse("[1, NULL]")).is_none());
        assert!(vector(&parse("([1, NULL])")).is_none());
        for text in ["[1, -0.5, 2e0]", "([1, -0.5, 2e0])", "(([1, -0.5, 2e0]))"] {
            let Some(ScalarValue::List(list)) = vector(&parse(text)) else {
                panic!("a vector literal: {text}");
            };
            let values = list.value(0);
            let values = values.as_any().downcast_ref::<Float64Array>().unwrap();
            assert_eq!(values.values().to_vec(), [1.0, -0.5, 2.0], "{text}");
        }
    }
}
