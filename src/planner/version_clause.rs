//! [`VersionClauseGuard`]: a time-travel clause that reaches DataFusion is an
//! error, never silently dropped.
//!
//! Some SQL dialects (Databricks, BigQuery, MS SQL, Snowflake) parse
//! `FROM t VERSION AS OF 3`, `TIMESTAMP AS OF ...`, `FOR SYSTEM_TIME AS OF ...`
//! or `AT(...)`, and DataFusion 54 then plans the table *ignoring* the clause:
//! the query would read the latest rows while the user asked for old ones.
//! [`crate::plan_lance_sql`] plans the clauses it supports on Lance tables
//! (see [`super::time_travel`]); any clause left — planned through
//! `SessionContext::sql`, or a form such as `AT(...)` — fails here naming
//! the table and the clause.

use crate::error::fail;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::planner::{
    RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::sql::sqlparser::ast::TableFactor;

/// Rejects table references that carry a version or timestamp clause.
#[derive(Debug, Default)]
pub(crate) struct VersionClauseGuard {}

impl RelationPlanner for VersionClauseGuard {
    fn plan_relation(
        &self,
        relation: TableFactor,
        _context: &mut dyn RelationPlannerContext,
    ) -> DFResult<RelationPlanning> {
        if let TableFactor::Table {
            name,
            version: Some(version),
            ..
        } = &relation
        {
            return fail!(
                not_supported,
                "'{version}' on table '{name}' is not supported here: DataFusion would ignore it \
                 and read the latest version. Lance tables are read as of a version with \
                 VERSION AS OF <n> | '<tag>' or TIMESTAMP AS OF <time> through lance_sql \
                 (LanceSessionContextExt) or lance-sql, or registered with \
                 OPTIONS ('lance.version' '<n>') or ('lance.tag' '<tag>')"
            );
        }
        Ok(RelationPlanning::Original(Box::new(relation)))
    }
}
