//! Statement-shaped tables: `DELETE`, `UPDATE`, merges and the table
//! functions are planned as a small table whose scan returns the node that
//! runs the statement — so planning, and `EXPLAIN`, never runs it.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use super::lookup::table_or_location;
use crate::location::{TableLocation, redact_uri};
use crate::physical_plan::target::project;
use crate::physical_plan::{Maintenance, MaintenanceExec};

/// A statement planned as a table.
#[async_trait]
pub(crate) trait Statement: fmt::Debug + Send + Sync + 'static {
    /// The rows the statement returns (usually one).
    fn schema(&self) -> SchemaRef;

    /// The plan that runs the statement when executed.
    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>>;
}

/// A statement naming its table by a string — a table name or a dataset
/// location — as the table functions do. The name is resolved before
/// physical planning ([`resolve_named`]), so an encoded plan needs no
/// catalog.
#[async_trait]
pub(crate) trait NamedTable: Statement + Sized {
    /// The table or location as the query names it.
    fn target(&self) -> &str;

    /// Where it lives, once resolved.
    fn location(&self) -> Option<&TableLocation>;

    /// The same statement, resolved to `location`.
    fn with_location(&self, location: TableLocation) -> Self;

    /// Where the table lives: as resolved, or looked up now.
    async fn table_location(&self, state: &dyn Session) -> DFResult<TableLocation> {
        match self.location() {
            Some(location) => Ok(location.clone()),
            None => table_or_location(state, self.target()).await,
        }
    }
}

/// `provider` with its table resolved, when it is an unresolved `S`.
pub(crate) async fn resolve_named<S: NamedTable>(
    provider: &dyn TableProvider,
    state: &dyn Session,
) -> DFResult<Option<Arc<dyn TableProvider>>> {
    match statement_of::<S>(provider) {
        Some(statement) if statement.location().is_none() => {
            let location = statement.table_location(state).await?;
            Ok(Some(StatementTable::provider(
                statement.with_location(location),
            )))
        }
        _ => Ok(None),
    }
}

/// A [`Statement`] as a DataFusion table.
#[derive(Debug)]
pub(crate) struct StatementTable<S>(S);

impl<S: Statement> StatementTable<S> {
    /// `statement` as a table provider.
    pub(crate) fn provider(statement: S) -> Arc<dyn TableProvider> {
        Arc::new(Self(statement))
    }

    /// The statement.
    pub(crate) fn statement(&self) -> &S {
        &self.0
    }
}

/// The statement `provider` holds, when it is a `StatementTable<S>`.
pub(crate) fn statement_of<S: Statement>(provider: &dyn TableProvider) -> Option<&S> {
    provider
        .downcast_ref::<StatementTable<S>>()
        .map(StatementTable::statement)
}

#[async_trait]
impl<S: Statement> TableProvider for StatementTable<S> {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        project(self.0.plan(state).await?, projection)
    }
}

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
}
