//! [`Maintain`]: a maintenance statement (`lance_vacuum`, `lance_tag`,
//! `lance_optimize`, `CREATE INDEX`, ...) naming its table by a string; on
//! a `db://` table it becomes the request the service carries out
//! ([`CloudDdlStatement`]).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::TableReference;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::cloud_ddl::{CloudDdlStatement, cloud_work};
use super::lookup::{Target, registered_target};
use super::statement::{NamedTable, Pinner, Statement, StatementTable};
use crate::location::{TableLocation, redact_uri};
use crate::physical_plan::{Maintenance, MaintenanceExec};

/// A maintenance statement (`lance_vacuum`, `lance_tag`, `lance_optimize`,
/// `CREATE INDEX`, ...) naming its table by a string: scanning it plans a
/// [`MaintenanceExec`] doing `work`.
pub(crate) struct Maintain<M> {
    /// The table or location as the query names it.
    pub(crate) target: String,
    /// Where it lives, once resolved (see [`crate::resolve_lance_tables`]).
    pub(crate) location: Option<TableLocation>,
    /// What the statement does.
    pub(crate) work: M,
}

impl<M: Maintenance> Maintain<M> {
    /// The statement doing `work` on `target`, as a table.
    pub(crate) fn provider(target: impl Into<String>, work: M) -> Arc<dyn TableProvider> {
        StatementTable::provider(Self {
            target: target.into(),
            location: None,
            work,
        })
    }
}

impl<M: Maintenance> fmt::Debug for Maintain<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The target may be a location with credentials in it.
        f.debug_struct("Maintain")
            .field("node", &M::NODE)
            .field("target", &redact_uri(&self.target))
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl<M: Maintenance> NamedTable for Maintain<M> {
    fn target(&self) -> &str {
        &self.target
    }

    fn location(&self) -> Option<&TableLocation> {
        self.location.as_ref()
    }

    fn with_location(&self, location: TableLocation) -> Self {
        Self {
            target: self.target.clone(),
            location: Some(location),
            work: self.work.clone(),
        }
    }
}

#[async_trait]
impl<M: Maintenance> Statement for Maintain<M> {
    fn schema(&self) -> SchemaRef {
        M::schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        let location = self.table_location(state).await?;
        Ok(Arc::new(MaintenanceExec::new(location, self.work.clone())))
    }

    async fn pin(
        &self,
        _pinner: &mut dyn Pinner,
        state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        // A `db://` table: the request the service carries out instead.
        if self.location.is_none()
            && let Some(Target::Cloud(cloud)) =
                registered_target(state, &TableReference::from(self.target.as_str())).await?
        {
            let ddl = cloud_work(&self.work, &self.target)?;
            return Ok(Some(StatementTable::provider(CloudDdlStatement::new(
                self.target.clone(),
                cloud,
                ddl,
            ))));
        }
        self.resolved(state).await
    }

    fn changes_tables(&self) -> bool {
        true
    }
}
