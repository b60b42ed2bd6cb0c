//! Upserts: `lance_merge(...)`, `INSERT OR REPLACE` and `MERGE INTO` all plan
//! into a [`LanceMergeExec`](crate::physical_plan::LanceMergeExec) over a
//! source hash-partitioned on the merge key.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::TableReference;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::expressions::{CastExpr, Column};
use datafusion::physical_plan::projection::ProjectionExec;

use super::LanceTableProvider;
use super::cloud_merge::CloudMerge;
use super::lookup::{Target, lance_table, registered_target};
use super::statement::{Pinner, Statement, StatementTable};
use crate::error::{Error, Result};
use crate::physical_plan::LanceMergeExec;
pub(crate) use crate::physical_plan::merge_options::{
    MERGE_FUNCTION_NAME, MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched,
    WhenNotMatchedBySource,
};
pub(crate) use crate::physical_plan::merge_options::{check_condition, stats_schema};
use crate::table::create::storable_type;

/// A merge — `lance_merge(...)`, `INSERT OR REPLACE` or `MERGE INTO` — as a
/// [`Statement`]: planning it plans the source and the merge node.
pub(crate) struct LanceMerge {
    target: String,
    /// The target table once resolved (by the query planner or `MERGE INTO`).
    target_table: Option<Arc<LanceTableProvider>>,
    source: LogicalPlan,
    keys: Vec<String>,
    options: MergeOptions,
}

impl fmt::Debug for LanceMerge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceMerge")
            .field("target", &self.target)
            .field("keys", &self.keys)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LanceMerge {
    pub(crate) fn new(
        target: String,
        source: LogicalPlan,
        keys: Vec<String>,
        options: MergeOptions,
    ) -> Self {
        Self {
            target,
            target_table: None,
            source,
            keys,
            options,
        }
    }

    /// The same merge into an already resolved target table.
    pub(crate) fn with_target(mut self, target: Arc<LanceTableProvider>) -> Self {
        self.target_table = Some(target);
        self
    }

    /// The source plan.
    pub(crate) fn source(&self) -> &LogicalPlan {
        &self.source
    }

    /// The target as the statement names it.
    pub(crate) fn target_name(&self) -> &str {
        &self.target
    }

    /// The target table, when resolved already.
    pub(crate) fn target_table(&self) -> Option<&Arc<LanceTableProvider>> {
        self.target_table.as_ref()
    }

    /// The merge key columns.
    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// What happens to matched and unmatched rows.
    pub(crate) fn options(&self) -> &MergeOptions {
        &self.options
    }

    /// The target table: the one resolved already, or the Lance table
    /// registered under the target name.
    pub(crate) async fn resolve_target(
        &self,
        state: &dyn Session,
    ) -> Result<Arc<LanceTableProvider>> {
        match &self.target_table {
            Some(table) => Ok(Arc::clone(table)),
            None => {
                lance_table(
                    state,
                    &TableReference::from(self.target.as_str()),
                    MERGE_FUNCTION_NAME,
                )
                .await
            }
        }
    }

    /// The merge as one into a `db://` table, when its target is one.
    async fn cloud_target(&self, state: &dyn Session) -> DFResult<Option<CloudMerge>> {
        if self.target_table.is_some() {
            return Ok(None);
        }
        let reference = TableReference::from(self.target.as_str());
        Ok(match registered_target(state, &reference).await? {
            Some(Target::Cloud(table)) => Some(CloudMerge::new(
                table,
                self.source.clone(),
                self.keys.clone(),
                self.options.clone(),
                MergeOutput::Stats,
            )),
            _ => None,
        })
    }

    /// The same merge into `target` (resolved) from `source`.
    pub(crate) fn with_parts(&self, target: Arc<LanceTableProvider>, source: LogicalPlan) -> Self {
        Self {
            target: self.target.clone(),
            target_table: Some(target),
            source,
            keys: self.keys.clone(),
            options: self.options.clone(),
        }
    }
}

#[async_trait]
impl Statement for LanceMerge {
    fn schema(&self) -> SchemaRef {
        stats_schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        if let Some(cloud) = self.cloud_target(state).await? {
            return cloud.plan(state).await;
        }
        let target = self.resolve_target(state).await?;
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return Err(Error::not_supported(format!(
                "{MERGE_FUNCTION_NAME}: needs a DataFusion SessionState"
            ))
            .into());
        };
        let options =
            self.options
                .planned(session, &target.schema(), self.source.schema().as_arrow())?;
        let source = state.create_physical_plan(&self.source).await?;
        Ok(target
            .plan_merge(state, source, &self.keys, options, MergeOutput::Stats)
            .await?)
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if let Some(cloud) = self.cloud_target(state).await? {
            return cloud.pin(pinner, state).await;
        }
        let target = self.resolve_target(state).await?;
        let target = pinner.table(&target).await?;
        let source = pinner.plan(&self.source).await?;
        Ok(Some(StatementTable::provider(
            self.with_parts(target, source),
        )))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}

impl LanceTableProvider {
    /// Plans a merge of `source` into this table on `keys`.
    pub(crate) async fn plan_merge(
        &self,
        state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        keys: &[String],
        options: MergeOptions,
        output: MergeOutput,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let target = self.write_target(state).await?;
        let source = conform_source(&self.name, &self.schema, source, keys, &options)?;
        Ok(Arc::new(LanceMergeExec::new(
            source,
            target,
            keys.to_vec(),
            options,
            output,
        )))
    }
}

/// Checks the source against the table and casts its columns to the table's
/// types: every source column must be a table column, keys must have the
/// table's type, and when rows can be inserted every NOT NULL column must be
/// present.
pub(crate) fn conform_source(
    table: &str,
    schema: &Schema,
    source: Arc<dyn ExecutionPlan>,
    keys: &[String],
    options: &MergeOptions,
) -> Result<Arc<dyn ExecutionPlan>> {
    if keys.is_empty() {
        return Err(Error::invalid_input(format!(
            "merge into '{table}': at least one key column is required"
        )));
    }
    let source_schema = source.schema();
    for key in keys {
        let Ok(column) = schema.field_with_name(key) else {
            return Err(Error::schema_mismatch(format!(
                "merge into '{table}': key column '{key}' is not a column of the table"
            )));
        };
        let Ok(given) = source_schema.field_with_name(key) else {
            return Err(Error::schema_mismatch(format!(
                "merge into '{table}': the source has no key column '{key}'"
            )));
        };
        if storable_type(given.data_type()) != *column.data_type() {
            return Err(Error::schema_mismatch(format!(
                "merge into '{table}': key column '{key}' is {} in the source but {} in the table",
                given.data_type(),
                column.data_type()
            )));
        }
    }
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = Vec::new();
    for (i, field) in source_schema.fields().iter().enumerate() {
        let Ok(column) = schema.field_with_name(field.name()) else {
            return Err(Error::schema_mismatch(format!(
                "merge into '{table}': the source column '{}' is not a column of the table",
                field.name()
            )));
        };
        let expr: Arc<dyn PhysicalExpr> = Arc::new(Column::new(field.name(), i));
        let expr = if field.data_type() == column.data_type() {
            expr
        } else {
            Arc::new(CastExpr::new(expr, column.data_type().clone(), None))
        };
        exprs.push((expr, field.name().clone()));
    }
    if options.inserts() {
        let missing: Vec<&str> = schema
            .fields()
            .iter()
            .filter(|f| !f.is_nullable() && source_schema.field_with_name(f.name()).is_err())
            .map(|f| f.name().as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::schema_mismatch(format!(
                "merge into '{table}': the source lacks NOT NULL column(s) {} which inserted \
                 rows need (or use 'when_not_matched=do_nothing')",
                missing.join(", ")
            )));
        }
    }
    Ok(Arc::new(ProjectionExec::try_new(exprs, source)?))
}
