//! [`ActionExec`]: a leaf that performs one maintenance action when executed
//! and returns its one-row report (planning, and so `EXPLAIN`, does nothing).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::future::BoxFuture;

/// The action: produces the report batch.
pub(crate) type Action = Arc<dyn Fn() -> BoxFuture<'static, DFResult<RecordBatch>> + Send + Sync>;

/// Runs an action at execution time.
pub(crate) struct ActionExec {
    description: String,
    action: Action,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for ActionExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl ActionExec {
    pub(crate) fn new(
        description: String,
        schema: SchemaRef,
        action: impl Fn() -> BoxFuture<'static, DFResult<RecordBatch>> + Send + Sync + 'static,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            description,
            action: Arc::new(action),
            properties,
        }
    }
}

impl DisplayAs for ActionExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description)
    }
}

impl ExecutionPlan for ActionExec {
    fn name(&self) -> &str {
        "ActionExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ActionExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("ActionExec has one partition, {partition} requested");
        }
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            futures::stream::once((self.action)()),
        )))
    }
}
