//! [`MaintenanceExec`]: the node of a statement that looks after a table
//! rather than reading or writing its rows — `lance_vacuum`, `lance_tag`,
//! `lance_optimize`, `CREATE INDEX` / `DROP INDEX`. It carries the table's
//! location and what to do (a [`Maintenance`] value, which the codecs encode),
//! and does it on the latest version when executed: planning, and so
//! `EXPLAIN`, changes nothing. It emits one row from one partition.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use lance::Dataset;

use crate::config::VersionSpec;
use crate::location::TableLocation;
use crate::physical_plan::one_row::one_row_properties;
use crate::session::LanceSessionCache;

/// What a [`MaintenanceExec`] does to a table: plain data, so the node can
/// be encoded and run anywhere.
pub trait Maintenance: fmt::Debug + Clone + Send + Sync + 'static {
    /// The node's name (`LanceVacuumExec`, ...).
    const NODE: &'static str;

    /// The schema of the one-row report.
    fn schema() -> SchemaRef;

    /// The parameters `EXPLAIN` shows after the uri, each as `, key=value`.
    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// Does the work on `dataset` (the latest version of the table at
    /// `location`) and reports it in one row. `memory` is the statement's
    /// pool: work that holds memory outside DataFusion's operators reserves
    /// it there so a memory limit counts it (index builds do).
    fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        memory: Arc<dyn MemoryPool>,
    ) -> impl Future<Output = DFResult<RecordBatch>> + Send + 'static;
}

/// Runs one [`Maintenance`] on the table at a location.
#[derive(Debug)]
pub struct MaintenanceExec<M: Maintenance> {
    location: TableLocation,
    work: M,
    properties: Arc<PlanProperties>,
}

impl<M: Maintenance> MaintenanceExec<M> {
    /// Does `work` on the table at `location` when executed.
    pub fn new(location: TableLocation, work: M) -> Self {
        Self {
            location,
            work,
            properties: one_row_properties(M::schema()),
        }
    }

    /// Where the table lives.
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// What the node does.
    pub fn work(&self) -> &M {
        &self.work
    }
}

impl<M: Maintenance> DisplayAs for MaintenanceExec<M> {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: uri={}", M::NODE, self.location.display_uri)?;
        self.work.fmt_params(f)
    }
}

impl<M: Maintenance> ExecutionPlan for MaintenanceExec<M> {
    fn name(&self) -> &str {
        M::NODE
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
            internal_err!("{} has no children", M::NODE)
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("{} has one partition, {partition} requested", M::NODE);
        }
        let work = self.work.clone();
        let location = self.location.clone();
        let fut = async move {
            let cache = LanceSessionCache::for_task(&context);
            let params = cache.params_for(&location);
            let dataset = cache
                .open(&location.uri, &params, &VersionSpec::Latest)
                .await?;
            work.run(dataset, location, Arc::clone(context.memory_pool()))
                .await
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            M::schema(),
            futures::stream::once(fut),
        )))
    }
}
