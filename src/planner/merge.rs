//! [`LanceMergePlanner`]: plans `lance_merge(...)` in `FROM`.
//!
//! ```sql
//! SELECT * FROM lance_merge('target_table', (SELECT ... any query ...), 'key1[,key2]'
//!                           [, 'when_matched=update_all'] [, ...]);
//! ```
//!
//! A relation planner (not a table function) because the source may be any
//! query with any number of columns. Planning builds the source's logical
//! plan only; the merge runs when the statement executes, so `EXPLAIN` never
//! writes.

use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, TableFactor, TableFunctionArgs,
};

use crate::error::fail;
use crate::table::merge::{LanceMerge, MERGE_FUNCTION_NAME, MergeOptions};
use crate::table::statement::StatementTable;

/// Plans `lance_merge(...)` table references.
#[derive(Debug, Default)]
pub(crate) struct LanceMergePlanner {}

impl RelationPlanner for LanceMergePlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> DFResult<RelationPlanning> {
        let TableFactor::Table {
            name,
            alias,
            args: Some(TableFunctionArgs { args, .. }),
            ..
        } = &relation
        else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let function = name.to_string();
        if !function.eq_ignore_ascii_case(MERGE_FUNCTION_NAME) {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        }
        let usage = format!(
            "usage: {MERGE_FUNCTION_NAME}('<table>', (<query>), '<key>[,<key>...]' [, '<option>=<value>' ...])"
        );
        if args.len() < 3 {
            return fail!(
                invalid_input,
                "{MERGE_FUNCTION_NAME} takes at least 3 arguments; {usage}"
            );
        }
        let mut strings = Vec::new();
        let mut source = None;
        for (i, arg) in args.iter().enumerate() {
            let FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) = arg else {
                return fail!(
                    invalid_input,
                    "{MERGE_FUNCTION_NAME}: unsupported argument {arg}; {usage}"
                );
            };
            if i == 1 {
                let ast::Expr::Subquery(query) = expr else {
                    return fail!(
                        invalid_input,
                        "{MERGE_FUNCTION_NAME}: the second argument must be a query in parentheses, \
                         e.g. (SELECT * FROM src); {usage}"
                    );
                };
                source = Some(context.plan(TableFactor::Derived {
                    lateral: false,
                    subquery: query.clone(),
                    alias: None,
                    sample: None,
                })?);
                continue;
            }
            let planned = context.sql_to_expr(expr.clone(), &DFSchema::empty())?;
            match planned {
                Expr::Literal(
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::Utf8View(Some(s))
                    | ScalarValue::LargeUtf8(Some(s)),
                    _,
                ) => strings.push(s),
                _ => {
                    return fail!(
                        invalid_input,
                        "{MERGE_FUNCTION_NAME}: argument {} must be a string literal; {usage}",
                        i + 1
                    );
                }
            }
        }
        let target = strings.remove(0);
        let keys: Vec<String> = strings
            .remove(0)
            .split(',')
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
            .collect();
        let options = MergeOptions::parse(&strings)?;
        let source = source.expect("second argument planned");
        let table = LanceMerge::new(target.clone(), source, keys, options);
        let plan = LogicalPlanBuilder::scan(
            format!("{MERGE_FUNCTION_NAME}({target})"),
            provider_as_source(StatementTable::provider(table)),
            None,
        )?
        .build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan,
            alias.clone(),
        ))))
    }
}
