//! Statement-shaped tables: `DELETE`, `UPDATE`, merges and the table
//! functions are planned as a small table whose scan returns the node that
//! runs the statement — so planning, and `EXPLAIN`, never runs it.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;

use super::LanceTableProvider;
use super::cloud::CloudTableProvider;
use super::lookup::{Target, table_or_location};
use crate::location::TableLocation;
use crate::physical_plan::inputs::project;

/// A statement planned as a table: `DELETE`, `UPDATE`, merges, searches
/// and the table functions. Its one home: how it plans, how it fixes the
/// versions it reads ([`Statement::pin`]) and whether it writes.
#[async_trait]
pub(crate) trait Statement: Any + fmt::Debug + Send + Sync {
    /// The rows the statement returns (usually one).
    fn schema(&self) -> SchemaRef;

    /// The plan that runs the statement when executed.
    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>>;

    /// The plan returning the `projection` of its rows: [`Self::plan`],
    /// projected (a statement that reads fewer columns when fewer are
    /// asked for overrides it).
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        project(self.plan(state).await?, projection)
    }

    /// The statement reading the tables `pinner` fixes (one version per
    /// table for the whole statement) with its named table looked up, or
    /// `None` when it reads none. Pinning a pinned statement changes
    /// nothing.
    async fn pin(
        &self,
        _pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        Ok(None)
    }

    /// Whether running it changes a table (so it may not run while
    /// another statement is being planned).
    fn changes_tables(&self) -> bool {
        false
    }
}

/// Fixes what a statement reads before physical planning (implemented by
/// the planner's snapshot resolution, see [`crate::LanceQueryPlanner`]).
#[async_trait]
pub(crate) trait Pinner: Send {
    /// `table` at the version this statement reads.
    async fn table(&mut self, table: &Arc<LanceTableProvider>)
    -> DFResult<Arc<LanceTableProvider>>;

    /// `db://` table `table` at the version this statement reads.
    async fn cloud_table(
        &mut self,
        table: &Arc<CloudTableProvider>,
    ) -> DFResult<Arc<CloudTableProvider>>;

    /// `target` at the version this statement reads.
    async fn target(&mut self, target: &Target) -> DFResult<Target> {
        Ok(match target {
            Target::Lance(table) => Target::Lance(self.table(table).await?),
            Target::Cloud(table) => Target::Cloud(self.cloud_table(table).await?),
        })
    }

    /// A plan nested in the statement, optimized, its tables fixed.
    async fn plan(&mut self, plan: &LogicalPlan) -> DFResult<LogicalPlan>;
}

/// A statement naming its table by a string — a table name or a dataset
/// location — as the table functions do. The name is resolved before
/// physical planning ([`NamedTable::resolved`]), so an encoded plan needs no
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

    /// The statement with its table looked up, when it is not yet.
    async fn resolved(&self, state: &dyn Session) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if self.location().is_some() {
            return Ok(None);
        }
        let location = self.table_location(state).await?;
        Ok(Some(StatementTable::provider(self.with_location(location))))
    }
}

/// A [`Statement`] as a DataFusion table.
#[derive(Debug)]
pub(crate) struct StatementTable(Box<dyn Statement>);

impl StatementTable {
    /// `statement` as a table provider.
    pub(crate) fn provider(statement: impl Statement) -> Arc<dyn TableProvider> {
        Arc::new(Self(Box::new(statement)))
    }
}

/// The statement `provider` holds, when it is a [`StatementTable`].
pub(crate) fn statement(provider: &dyn TableProvider) -> Option<&dyn Statement> {
    provider
        .downcast_ref::<StatementTable>()
        .map(|table| table.0.as_ref())
}

/// The statement `provider` holds, when it is a `StatementTable` of an `S`.
pub(crate) fn statement_of<S: Statement>(provider: &dyn TableProvider) -> Option<&S> {
    let statement: &dyn Any = statement(provider)?;
    statement.downcast_ref::<S>()
}

#[async_trait]
impl TableProvider for StatementTable {
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
        self.0.scan(state, projection).await
    }
}
