//! Planning of `INSERT INTO`, `INSERT OVERWRITE` and `TRUNCATE`.

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;

use super::LanceTableProvider;
use super::merge::{MergeOptions, MergeOutput};
use crate::config::LanceConfig;
use crate::error::{Error, Result};
use crate::location::Snapshot;
use crate::physical_plan::fragment_rows::fragments_schema;
use crate::physical_plan::{CommitKind, LanceCommitExec, LanceSink, LanceWriteExec, WriteTarget};

impl LanceTableProvider {
    /// The write target of a statement planned with `state`: the table's
    /// latest version as this query sees it. Pinned tables are read-only.
    pub(crate) async fn write_target(&self, state: &dyn Session) -> Result<Arc<WriteTarget>> {
        if !self.version.is_latest() {
            return Err(Error::read_only(format!(
                "table '{}' is pinned to {} and is read-only; register the table without \
                 'lance.version'/'lance.tag' to write to it",
                self.name, self.version
            )));
        }
        let base = self.snapshot(state).await?;
        let settings = LanceConfig::from_options(state.config_options());
        // Tasks open the table through the session, finding these store
        // parameters by location.
        self.session_cache(state)
            .register_params(&self.location, &self.params);
        Ok(Arc::new(WriteTarget::new(
            self.name.clone(),
            self.location.clone(),
            Some(Snapshot::of(&base)),
            Arc::clone(&self.schema),
            &settings,
            &self.options,
        )))
    }

    /// `INSERT INTO` / `INSERT OVERWRITE`: parallel writers, one commit.
    pub(crate) async fn plan_insert(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let kind = match insert_op {
            InsertOp::Append => CommitKind::Append,
            InsertOp::Overwrite => CommitKind::Overwrite,
            InsertOp::Replace => {
                let keys = self.primary_key_names().ok_or_else(|| {
                    Error::not_supported(format!(
                        "INSERT OR REPLACE into '{}' needs a primary key; declare one with \
                         PRIMARY KEY when creating the table, or use lance_merge(...) with \
                         explicit key columns",
                        self.name
                    ))
                })?;
                return self
                    .plan_merge(
                        state,
                        input,
                        &keys,
                        MergeOptions::default(),
                        MergeOutput::Count,
                    )
                    .await;
            }
        };
        let target = self.write_target(state).await?;
        let write = Arc::new(LanceWriteExec::new(input, Arc::clone(&target)));
        Ok(Arc::new(LanceCommitExec::new(write, target, kind)))
    }

    /// A [`LanceSink`] appending to (or, with [`InsertOp::Overwrite`],
    /// replacing the rows of) this table, for engines that plan
    /// `DataSinkExec` themselves: the input must have the table's schema.
    /// It reads the version a statement planned with `state` reads, like
    /// `INSERT`. `InsertOp::Replace` (an upsert) has no sink: plan it with
    /// `INSERT OR REPLACE` or `lance_merge`.
    pub async fn data_sink(&self, state: &dyn Session, insert_op: InsertOp) -> Result<LanceSink> {
        let kind = match insert_op {
            InsertOp::Append => CommitKind::Append,
            InsertOp::Overwrite => CommitKind::Overwrite,
            InsertOp::Replace => {
                return Err(Error::not_supported(format!(
                    "a data sink cannot upsert into '{}'; use INSERT OR REPLACE or \
                     lance_merge(...)",
                    self.name
                )));
            }
        };
        Ok(LanceSink::new(self.write_target(state).await?, kind))
    }

    /// The primary key column names, in key order.
    pub(crate) fn primary_key_names(&self) -> Option<Vec<String>> {
        self.constraints.as_ref()?.iter().find_map(|c| match c {
            datafusion::common::Constraint::PrimaryKey(indices) => Some(
                indices
                    .iter()
                    .map(|&i| self.schema.field(i).name().clone())
                    .collect(),
            ),
            _ => None,
        })
    }

    /// `TRUNCATE`: one `Overwrite` with no fragments; the schema is kept.
    pub(crate) async fn plan_truncate(
        &self,
        state: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let target = self.write_target(state).await?;
        let nothing = Arc::new(EmptyExec::new(fragments_schema()));
        Ok(Arc::new(LanceCommitExec::new(
            nothing,
            target,
            CommitKind::Truncate,
        )))
    }
}
