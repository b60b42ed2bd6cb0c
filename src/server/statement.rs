//! Running one statement for a client: planned through the crate's front
//! door, bounded by the server's statement timeout and its cap on
//! concurrent statements, streamed back batch by batch.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use datafusion::arrow::array::{Array, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{RecordBatchStream, TaskContext};
use datafusion::logical_expr::{LogicalPlan, Statement};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream, execute_stream};
use datafusion::prelude::SessionContext;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::Status;

use crate::cancel::{self, Cancellation};

/// How long a write that the statement timeout cancelled is given to fail
/// cleanly (nothing committed, its files removed) before it is dropped.
const WRITE_GRACE: Duration = Duration::from_secs(30);

/// What bounds the statements of a server.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    permits: Arc<Semaphore>,
    timeout: Option<Duration>,
}

impl Limits {
    pub(crate) fn new(max_concurrent: usize, timeout: Option<Duration>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            timeout,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.timeout.map(|t| Instant::now() + t)
    }

    fn timed_out(&self) -> DataFusionError {
        DataFusionError::Execution(format!(
            "statement timeout ({} s) exceeded",
            self.timeout.map_or(0.0, |t| t.as_secs_f64())
        ))
    }
}

/// A client's request to cancel its running statement (a Postgres cancel
/// request); a Flight SQL client cancels by going away. Clones fire
/// together: one request cancels every statement of a message.
#[derive(Clone)]
pub(crate) struct CancelSignal {
    requested: Option<Shared<BoxFuture<'static, ()>>>,
    fired: bool,
}

impl CancelSignal {
    /// A signal that never fires.
    pub(crate) fn never() -> Self {
        Self {
            requested: None,
            fired: false,
        }
    }

    /// Fires when `receiver` receives; not when its sender is dropped (the
    /// client's next message replaced it).
    pub(crate) fn on(receiver: futures::channel::oneshot::Receiver<()>) -> Self {
        let requested = async move {
            if receiver.await.is_err() {
                futures::future::pending::<()>().await;
            }
        };
        Self {
            requested: Some(requested.boxed().shared()),
            fired: false,
        }
    }

    /// Resolves once the client asked to cancel (at once if it already did).
    async fn wait(&mut self) {
        std::future::poll_fn(|cx| {
            if self.poll_fired(cx) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    fn poll_fired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.fired
            && let Some(requested) = self.requested.as_mut()
            && requested.poll_unpin(cx).is_ready()
        {
            self.fired = true;
            self.requested = None;
        }
        self.fired
    }
}

/// The error of a statement its client cancelled.
fn cancelled_by_client() -> DataFusionError {
    DataFusionError::Execution(format!(
        "{}: canceling statement due to user request",
        cancel::CANCELLED
    ))
}

/// The plan of `sql` (one statement), made by the crate's front door.
/// Planning never writes.
pub(crate) async fn plan(ctx: &SessionContext, sql: &str) -> Result<LogicalPlan, Status> {
    crate::plan_sql(&ctx.state(), sql).await.map_err(status)
}

/// A statement whose `FlightInfo` was asked for.
pub(crate) enum Started {
    /// It ran (DDL, `SET`, DML, anything that writes): its result.
    Done(SchemaRef, Vec<RecordBatch>),
    /// A query, planned: it runs when its rows are read.
    Query(Arc<dyn ExecutionPlan>, Arc<TaskContext>),
}

/// Starts `plan` in `ctx` on a task of its own, so that a client that goes
/// away (dropping this future) does not cut it short: a statement that
/// changes something — DDL, `SET`, DML, `ALTER`, catalog DDL, anything with
/// a writing node — runs now, to its end; one that never has its result
/// read still runs. A query is only planned here. Past the statement
/// timeout a write is cancelled (it fails like any failed statement) and
/// given [`WRITE_GRACE`] to do so; DDL that Lance cannot stop (`ALTER`,
/// a catalog's `CREATE TABLE AS`) runs to its end. A cancel request from
/// the client (`stop`) cancels a write the same way, and waits for its
/// end: it fails (nothing committed) or, had it committed before it saw
/// the cancellation, succeeds.
pub(crate) async fn start(
    ctx: &SessionContext,
    plan: LogicalPlan,
    limits: &Limits,
    stop: &mut CancelSignal,
) -> Result<Started, Status> {
    let deadline = limits.deadline();
    let permit = tokio::select! {
        permit = acquire(deadline, limits) => permit?,
        () = stop.wait() => return Err(status(cancelled_by_client())),
    };
    let changes = match &plan {
        LogicalPlan::Statement(Statement::Execute(_)) => false,
        LogicalPlan::Dml(_)
        | LogicalPlan::Ddl(_)
        | LogicalPlan::Copy(_)
        | LogicalPlan::Statement(_) => true,
        _ => false,
    };
    let ctx = ctx.clone();
    let limits = limits.clone();
    let cancellation = Arc::new(Cancellation::default());
    let cancels = Arc::clone(&cancellation);
    let mut run = tokio::spawn(async move {
        let _permit = permit;
        let cancellation = cancels;
        let frame = crate::execute_lance_plan(&ctx, plan).await?;
        let mut config = frame.task_ctx().session_config().clone();
        config.set_extension(Arc::clone(&cancellation));
        let task = Arc::new(frame.task_ctx().with_session_config(config));
        let physical = frame.create_physical_plan().await?;
        if !changes && !cancel::writes(&physical) {
            return Ok(Started::Query(physical, task));
        }
        let schema = physical.schema();
        let mut work = Box::pin(async move {
            let stream = execute_stream(physical, task)?;
            stream
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<DFResult<Vec<_>>>()
        });
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => futures::future::pending().await,
            }
        };
        let batches = tokio::select! {
            done = &mut work => done?,
            () = sleep => {
                cancellation.cancel();
                return match tokio::time::timeout(WRITE_GRACE, &mut work).await {
                    // It had finished its input and committed after all.
                    Ok(Ok(batches)) => Ok(Started::Done(schema, batches)),
                    Ok(Err(_)) => Err(limits.timed_out()),
                    Err(_) => Err(DataFusionError::Execution(format!(
                        "{}; the statement did not stop within {} s of being cancelled: \
                         whether it committed is in lance_versions",
                        limits.timed_out(),
                        WRITE_GRACE.as_secs()
                    ))),
                };
            }
        };
        Ok(Started::Done(schema, batches))
    });
    let outcome = tokio::select! {
        outcome = &mut run => outcome,
        () = stop.wait() => {
            // A query is only being planned: its rows, read next, end with
            // the cancellation.
            cancellation.cancel();
            match run.await {
                Ok(Err(e)) if e.to_string().contains(cancel::CANCELLED) => {
                    Ok(Err(cancelled_by_client()))
                }
                outcome => outcome,
            }
        }
    };
    outcome
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(status)
}

impl Started {
    /// The schema of the statement's rows.
    pub(crate) fn schema(&self) -> SchemaRef {
        match self {
            Self::Done(schema, _) => Arc::clone(schema),
            Self::Query(plan, _) => plan.schema(),
        }
    }

    /// The statement's rows: a query runs now (taking its place under the
    /// concurrency cap, bounded by the statement timeout from now) and
    /// stops when the stream is dropped or the client cancels it (the
    /// stream then ends with an error).
    pub(crate) async fn rows(
        self,
        limits: &Limits,
        mut stop: CancelSignal,
    ) -> Result<SendableRecordBatchStream, Status> {
        match self {
            Self::Done(schema, batches) => {
                let stream = futures::stream::iter(batches.into_iter().map(Ok));
                Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
            }
            Self::Query(plan, task) => {
                let deadline = limits.deadline();
                let permit = tokio::select! {
                    permit = acquire(deadline, limits) => permit?,
                    () = stop.wait() => return Err(status(cancelled_by_client())),
                };
                let stream = execute_stream(plan, task).map_err(status)?;
                Ok(Box::pin(Bounded {
                    schema: stream.schema(),
                    inner: stream,
                    deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
                    limits: limits.clone(),
                    stop,
                    _permit: permit,
                    done: false,
                }))
            }
        }
    }
}

/// A place under the concurrency cap, waited for until `deadline`.
async fn acquire(
    deadline: Option<Instant>,
    limits: &Limits,
) -> Result<OwnedSemaphorePermit, Status> {
    within(deadline, limits, async {
        Arc::clone(&limits.permits)
            .acquire_owned()
            .await
            .map_err(|e| DataFusionError::Internal(e.to_string()))
    })
    .await
    .map_err(status)
}

/// Runs `plan` and returns the rows it changed: a DML statement's `count`,
/// `-1` for a statement without one (DDL, `SET`, a query, whose rows are
/// read and dropped).
pub(crate) async fn execute_update(
    ctx: &SessionContext,
    plan: LogicalPlan,
    limits: &Limits,
) -> Result<i64, Status> {
    let mut stream = start(ctx, plan, limits, &mut CancelSignal::never())
        .await?
        .rows(limits, CancelSignal::never())
        .await?;
    // The first batch holds a DML count; a query's rows are read and
    // dropped, not kept.
    let mut first = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(status)?;
        if first.is_empty() {
            first.push(batch);
        } else {
            first.clear();
            first.push(RecordBatch::new_empty(batch.schema()));
        }
    }
    Ok(count_of(&first).unwrap_or(-1))
}

/// The `count` a DML statement returns.
pub(crate) fn count_of(batches: &[RecordBatch]) -> Option<i64> {
    let [batch] = batches else { return None };
    if batch.num_columns() != 1
        || batch.num_rows() != 1
        || batch.schema().field(0).name() != "count"
    {
        return None;
    }
    let counts = batch.column(0).as_any().downcast_ref::<UInt64Array>()?;
    (!counts.is_null(0)).then(|| i64::try_from(counts.value(0)).unwrap_or(i64::MAX))
}

async fn within<T>(
    deadline: Option<Instant>,
    limits: &Limits,
    work: impl Future<Output = DFResult<T>>,
) -> DFResult<T> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at, work)
            .await
            .unwrap_or_else(|_| Err(limits.timed_out())),
        None => work.await,
    }
}

/// A query's stream, ended with an error at the statement timeout or when
/// its client cancels it; holds
/// the statement's place under the concurrency cap until it is dropped.
struct Bounded {
    schema: SchemaRef,
    inner: SendableRecordBatchStream,
    deadline: Option<Pin<Box<Sleep>>>,
    limits: Limits,
    stop: CancelSignal,
    _permit: OwnedSemaphorePermit,
    done: bool,
}

impl Stream for Bounded {
    type Item = DFResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            self.done = true;
            return Poll::Ready(Some(Err(self.limits.timed_out())));
        }
        if self.stop.poll_fired(cx) {
            self.done = true;
            return Poll::Ready(Some(Err(cancelled_by_client())));
        }
        let next = self.inner.poll_next_unpin(cx);
        if matches!(next, Poll::Ready(None)) {
            self.done = true;
        }
        next
    }
}

impl RecordBatchStream for Bounded {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// A DataFusion error as a gRPC status: the crate's message, with a code
/// that says what kind of failure it was.
pub(crate) fn status(error: DataFusionError) -> Status {
    let message = error.to_string();
    match error.find_root() {
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_)
        | DataFusionError::Configuration(_) => Status::invalid_argument(message),
        DataFusionError::ResourcesExhausted(_) => Status::resource_exhausted(message),
        _ if message.contains("statement timeout") => Status::deadline_exceeded(message),
        _ if message.contains(cancel::CANCELLED) => Status::cancelled(message),
        _ => Status::internal(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_statement_waits_for_a_place_until_its_timeout() {
        let limits = Limits::new(1, Some(Duration::from_millis(50)));
        let held = acquire(limits.deadline(), &limits).await.unwrap();
        let waited = acquire(limits.deadline(), &limits).await.unwrap_err();
        assert_eq!(waited.code(), tonic::Code::DeadlineExceeded);
        assert!(
            waited
                .message()
                .contains("statement timeout (0.05 s) exceeded")
        );
        drop(held);
        let _again = acquire(limits.deadline(), &limits).await.unwrap();
    }

    #[test]
    fn only_a_dml_count_is_a_count() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::arrow::datatypes::{Field, Schema};
        let count = |name: &str, array: Arc<dyn Array>| {
            let schema = Schema::new(vec![Field::new(name, array.data_type().clone(), true)]);
            RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap()
        };
        let rows = count("count", Arc::new(UInt64Array::from(vec![3])));
        assert_eq!(count_of(&[rows]), Some(3));
        let other = count("n", Arc::new(UInt64Array::from(vec![3])));
        assert_eq!(count_of(&[other]), None);
        let signed = count("count", Arc::new(Int64Array::from(vec![3])));
        assert_eq!(count_of(&[signed]), None);
        assert_eq!(count_of(&[]), None);
    }
}
