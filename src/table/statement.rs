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

use crate::physical_plan::target::project;

/// A statement planned as a table.
#[async_trait]
pub(crate) trait Statement: fmt::Debug + Send + Sync + 'static {
    /// The rows the statement returns (usually one).
    fn schema(&self) -> SchemaRef;

    /// The plan that runs the statement when executed.
    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>>;
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
