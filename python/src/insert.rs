//! `INSERT INTO` through DataFusion's Python bindings: the rows to insert
//! come from a plan of the *other* library, whose tasks need that library's
//! Tokio runtime — which its plan does not carry across the FFI. This
//! crate's writers run on this library's runtime, so the foreign input is
//! not polled by them: [`PumpExec`] (the top of the insert plan, polled by
//! the Python side on its own runtime's thread) polls the foreign streams
//! itself and hands their batches to the writers through bounded channels
//! ([`ForeignInputExec`]).

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{Statistics, internal_err};
use datafusion::datasource::TableType;
use datafusion::error::Result;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    RecordBatchStream,
};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};

use crate::describe::{described, exported_scan};
use crate::runtime::in_runtime;

/// Batches a foreign partition may have in flight to its writer.
const IN_FLIGHT: usize = 2;

type Item = Result<RecordBatch>;

/// The receivers of one execution, by partition, taken by the writers.
type Slots = Arc<Mutex<Vec<Option<mpsc::Receiver<Item>>>>>;

/// A Lance table as exported to Python: the table itself, except that
/// `INSERT INTO` pumps its foreign input (see the module docs).
#[derive(Debug)]
pub(crate) struct ExportedTable {
    pub(crate) inner: Arc<dyn TableProvider>,
}

#[async_trait]
impl TableProvider for ExportedTable {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.inner.supports_filters_pushdown(filters)
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // A foreign session's physical expressions are the other library's:
        // each evaluation of a pushed filter would send the batch across the
        // FFI and back. The scan plans on a session of this library with the
        // caller's settings instead.
        let local = SessionStateBuilder::new()
            .with_config(state.config().clone())
            .with_runtime_env(Arc::clone(state.runtime_env()))
            .build();
        exported_scan(in_runtime(self.inner.scan(&local, projection, filters, limit)).await?)
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let slots: Slots = Arc::default();
        let bridged = Arc::new(ForeignInputExec {
            properties: Arc::clone(input.properties()),
            schema: input.schema(),
            slots: Arc::clone(&slots),
        });
        let plan = in_runtime(self.inner.insert_into(state, bridged, insert_op)).await?;
        let plan = described(plan)?;
        Ok(Arc::new(PumpExec {
            properties: Arc::clone(plan.properties()),
            plan,
            foreign: input,
            slots,
        }))
    }
}

/// The foreign input as the writers see it: one channel per partition.
#[derive(Debug)]
struct ForeignInputExec {
    properties: Arc<PlanProperties>,
    schema: SchemaRef,
    slots: Slots,
}

impl DisplayAs for ForeignInputExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ForeignInputExec")
    }
}

impl ExecutionPlan for ForeignInputExec {
    fn name(&self) -> &str {
        "ForeignInputExec"
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
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("ForeignInputExec has no children");
        }
        Ok(self)
    }

    fn execute(&self, partition: usize, _: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let receiver = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(partition)
            .and_then(Option::take);
        let Some(receiver) = receiver else {
            return internal_err!(
                "ForeignInputExec: partition {partition} is not pumped (executed twice?)"
            );
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            receiver,
        )))
    }
}

/// The top of an insert: runs `plan` and pumps `foreign` into its
/// [`ForeignInputExec`] from the thread that polls it.
#[derive(Debug)]
struct PumpExec {
    properties: Arc<PlanProperties>,
    plan: Arc<dyn ExecutionPlan>,
    foreign: Arc<dyn ExecutionPlan>,
    slots: Slots,
}

impl DisplayAs for PumpExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PumpExec")
    }
}

impl ExecutionPlan for PumpExec {
    fn name(&self) -> &str {
        self.plan.name()
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
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("PumpExec has no children");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let count = self.foreign.output_partitioning().partition_count();
        let mut pumps = Vec::with_capacity(count);
        let mut receivers = Vec::with_capacity(count);
        for p in 0..count {
            let (sender, receiver) = mpsc::channel(IN_FLIGHT);
            pumps.push(Some(Pump {
                source: self.foreign.execute(p, Arc::clone(&context))?,
                sender,
                pending: None,
            }));
            receivers.push(Some(receiver));
        }
        *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = receivers;
        Ok(Box::pin(Pumped {
            schema: self.plan.schema(),
            inner: self.plan.execute(partition, context)?,
            pumps,
        }))
    }
}

/// One foreign partition being forwarded.
struct Pump {
    source: SendableRecordBatchStream,
    sender: mpsc::Sender<Item>,
    pending: Option<Item>,
}

impl Pump {
    /// Forwards what is ready; `false` once the partition is done (or its
    /// writer is gone).
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if let Some(item) = self.pending.take() {
                match self.sender.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        if self.sender.start_send(item).is_err() {
                            return false;
                        }
                    }
                    Poll::Ready(Err(_)) => return false,
                    Poll::Pending => {
                        self.pending = Some(item);
                        return true;
                    }
                }
            }
            match self.source.poll_next_unpin(cx) {
                Poll::Ready(Some(item)) => self.pending = Some(item),
                Poll::Ready(None) => return false,
                Poll::Pending => return true,
            }
        }
    }
}

/// The insert's rows, with the pumps polled before each poll of them.
struct Pumped {
    schema: SchemaRef,
    inner: SendableRecordBatchStream,
    pumps: Vec<Option<Pump>>,
}

impl Stream for Pumped {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        for slot in self.pumps.iter_mut() {
            if let Some(pump) = slot
                && !pump.poll(cx)
            {
                *slot = None;
            }
        }
        let polled = self.inner.poll_next_unpin(cx);
        if matches!(polled, Poll::Ready(None)) {
            self.pumps.clear();
        }
        polled
    }
}

impl RecordBatchStream for Pumped {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}
