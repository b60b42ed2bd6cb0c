//! [`CloudMerge`]: `lance_merge` / `MERGE INTO` into a `db://` table, as the
//! service's `merge_insert` (see
//! [`CloudMergeExec`](crate::physical_plan::CloudMergeExec)).
//!
//! `merge_insert` expresses: update every matched row (or those where a
//! condition over `source.`/`target.` columns holds) or leave it; insert
//! every unmatched source row or none; delete every target row the source
//! does not match (or those where a condition holds) or none. Deleting or
//! failing on matched rows has no form there and is refused.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;

use super::cloud::CloudTableProvider;
use super::merge::{
    MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched, WhenNotMatchedBySource,
    conform_source, stats_schema,
};
use super::statement::{Pinner, Statement, StatementTable};
use crate::cloud::sql::to_qualified_lance_sql;
use crate::cloud::{MergeRequest, to_lance_sql};
use crate::error::{Error, Result};
use crate::physical_plan::cloud_merge::{CloudMergeExec, CloudMergeParts};
use crate::physical_plan::one_row::count_schema;

/// A merge into a `db://` table (a [`Statement`] returning the merge's
/// statistics, or its count for `INSERT OR REPLACE`).
pub(crate) struct CloudMerge {
    target: Arc<CloudTableProvider>,
    source: LogicalPlan,
    keys: Vec<String>,
    options: MergeOptions,
    output: MergeOutput,
}

impl fmt::Debug for CloudMerge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudMerge")
            .field("table", &self.target.display_uri())
            .field("keys", &self.keys)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl CloudMerge {
    pub(crate) fn new(
        target: Arc<CloudTableProvider>,
        source: LogicalPlan,
        keys: Vec<String>,
        options: MergeOptions,
        output: MergeOutput,
    ) -> Self {
        Self {
            target,
            source,
            keys,
            options,
            output,
        }
    }

    pub(crate) fn target(&self) -> &CloudTableProvider {
        &self.target
    }

    pub(crate) fn source(&self) -> &LogicalPlan {
        &self.source
    }

    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    pub(crate) fn options(&self) -> &MergeOptions {
        &self.options
    }

    pub(crate) fn output(&self) -> MergeOutput {
        self.output
    }

    fn refuse(&self, what: impl fmt::Display) -> Error {
        Error::not_supported(format!(
            "merge into {} ({}): {what}; the service's merge_insert expresses updating matched \
             rows (all, or where a condition holds), inserting unmatched source rows, and \
             deleting target rows the source does not match (all, or where a condition holds)",
            self.target.name(),
            self.target.display_uri()
        ))
    }

    /// The request `options` (planned) make.
    fn request(&self, options: &MergeOptions) -> Result<MergeRequest> {
        let condition = |c: &MergeCondition, qualified: bool| -> Result<String> {
            let MergeCondition::Expr(expr) = c else {
                return Err(self.refuse(format_args!("the condition {c} was not planned")));
            };
            let sql = if qualified {
                to_qualified_lance_sql(expr)
            } else {
                to_lance_sql(&unqualified(expr))
            };
            sql.ok_or_else(|| {
                self.refuse(format_args!(
                    "the condition `{expr}` cannot be sent to the service"
                ))
            })
        };
        let mut request = MergeRequest {
            keys: self.keys.clone(),
            ..Default::default()
        };
        match &options.when_matched {
            WhenMatched::UpdateAll => request.update_all = true,
            WhenMatched::UpdateIf(c) => {
                request.update_all = true;
                request.update_filter = Some(condition(c, true)?);
            }
            WhenMatched::DoNothing => {}
            WhenMatched::Delete => return Err(self.refuse("deleting matched rows")),
            WhenMatched::Fail => return Err(self.refuse("failing on matched rows")),
        }
        request.insert_all = options.when_not_matched == WhenNotMatched::InsertAll;
        match &options.when_not_matched_by_source {
            WhenNotMatchedBySource::Keep => {}
            WhenNotMatchedBySource::Delete => request.delete_by_source = true,
            WhenNotMatchedBySource::DeleteIf(c) => {
                request.delete_by_source = true;
                request.delete_filter = Some(condition(c, false)?);
            }
        }
        Ok(request)
    }
}

/// `expr` with its columns' relations dropped (a condition on the target
/// alone, which the service evaluates over the table's columns).
fn unqualified(expr: &Expr) -> Expr {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    expr.clone()
        .transform(|e| match e {
            Expr::Column(c) => Ok(Transformed::yes(Expr::Column(c.name.into()))),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| expr.clone())
}

#[async_trait]
impl Statement for CloudMerge {
    fn schema(&self) -> SchemaRef {
        match self.output {
            MergeOutput::Stats => stats_schema(),
            MergeOutput::Count => count_schema(),
        }
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.target.check_writable()?;
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return Err(self
                .refuse("planning needs a DataFusion SessionState")
                .into());
        };
        let table = self.target.schema();
        let options = self
            .options
            .planned(session, &table, self.source.schema().as_arrow())?;
        let request = self.request(&options)?;
        let source = state.create_physical_plan(&self.source).await?;
        let source = conform_source(self.target.name(), &table, source, &self.keys, &options)?;
        Ok(Arc::new(CloudMergeExec::new(
            Arc::clone(&source),
            CloudMergeParts {
                name: self.target.name().to_string(),
                table: self.target.parts().table,
                schema: source.schema(),
                merge: request,
                output: self.output,
            },
        )))
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let source = pinner.plan(&self.source).await?;
        Ok(Some(StatementTable::provider(Self {
            target: Arc::clone(&self.target),
            source,
            keys: self.keys.clone(),
            options: self.options.clone(),
            output: self.output,
        })))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}
