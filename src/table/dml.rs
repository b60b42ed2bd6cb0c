//! [`LanceDml`]: the planned form of a `DELETE`/`UPDATE` on a Lance
//! table (see [`crate::planner::LanceDmlRewrite`]).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;

use super::LanceTableProvider;
use super::statement::{Pinner, Statement, StatementTable};
use crate::physical_plan::one_row::count_schema;
use crate::physical_plan::{LanceDeleteExec, LanceUpdateExec};

/// Which row-level statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DmlOp {
    /// `DELETE`: the input yields the row addresses to delete.
    Delete,
    /// `UPDATE`: the input yields the new rows plus the addresses they replace.
    Update,
}

impl fmt::Display for DmlOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DmlOp::Delete => "DELETE FROM",
            DmlOp::Update => "UPDATE",
        })
    }
}

/// A `DELETE`/`UPDATE` (a [`Statement`] returning one `count` row): planning
/// it plans the statement's input and the node that applies it when executed.
pub(crate) struct LanceDml {
    op: DmlOp,
    target: Arc<LanceTableProvider>,
    input: LogicalPlan,
}

impl fmt::Debug for LanceDml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceDml")
            .field("op", &self.op)
            .field("table", &self.target.name())
            .finish_non_exhaustive()
    }
}

impl LanceDml {
    pub(crate) fn new(op: DmlOp, target: Arc<LanceTableProvider>, input: LogicalPlan) -> Self {
        Self { op, target, input }
    }

    /// Which statement.
    pub(crate) fn op(&self) -> DmlOp {
        self.op
    }

    /// The table the statement changes.
    pub(crate) fn target(&self) -> &Arc<LanceTableProvider> {
        &self.target
    }

    /// The plan selecting the rows to change.
    pub(crate) fn input(&self) -> &LogicalPlan {
        &self.input
    }

    /// The same statement over another target and input.
    pub(crate) fn with_parts(&self, target: Arc<LanceTableProvider>, input: LogicalPlan) -> Self {
        Self::new(self.op, target, input)
    }
}

#[async_trait]
impl Statement for LanceDml {
    fn schema(&self) -> SchemaRef {
        count_schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        let target = self.target.write_target(state).await?;
        let input = state.create_physical_plan(&self.input).await?;
        Ok(match self.op {
            DmlOp::Delete => Arc::new(LanceDeleteExec::new(input, target)),
            DmlOp::Update => Arc::new(LanceUpdateExec::new(input, target)?),
        })
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let target = pinner.table(&self.target).await?;
        let input = pinner.plan(&self.input).await?;
        Ok(Some(StatementTable::provider(
            self.with_parts(target, input),
        )))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}
