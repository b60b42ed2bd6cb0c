//! Cancelling a running statement so that it fails like any failed
//! statement: nothing committed, its files removed.
//!
//! Dropping a statement's stream stops a query, but a write dropped in the
//! middle leaves the files its writers had written (until `lance_vacuum`).
//! A [`Cancellation`] installed on the session before a statement runs makes
//! the statement's writers — `INSERT`, `COPY`, `CREATE TABLE AS`, `DELETE`,
//! `UPDATE`, merges — see their input end in an error instead, so the
//! statement takes its ordinary failure path. Nothing in a plan refers to
//! it: nodes find it in the task's session config when they execute.
//!
//! ```
//! # use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use datafusion_lance::cancel::Cancellation;
//!
//! let ctx = SessionContext::new();
//! let cancellation = Cancellation::install(&ctx);
//! // ... run a statement; from another task or thread:
//! cancellation.cancel();
//! assert!(cancellation.is_cancelled());
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use tokio::sync::Notify;

/// The error text of a cancelled statement.
pub const CANCELLED: &str = "the statement was cancelled";

/// A statement's cancellation signal (see the [module docs](self)).
#[derive(Debug, Default)]
pub struct Cancellation {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancellation {
    /// A new signal, installed on `ctx` for the statements it runs from now
    /// on (replacing the previous one).
    pub fn install(ctx: &SessionContext) -> Arc<Self> {
        let cancellation = Arc::new(Self::default());
        ctx.state_ref()
            .write()
            .config_mut()
            .set_extension(Arc::clone(&cancellation));
        cancellation
    }

    /// Cancels the statements running under this signal.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// The signal of the statement `context` runs for, if any.
    fn of(context: &TaskContext) -> Option<Arc<Self>> {
        context.session_config().get_extension::<Self>()
    }
}

/// A physical optimizer rule that gives every join (and `UnnestExec`) a
/// yield point: DataFusion's `CooperativeExec` above it.
///
/// A join can produce batch after batch from one input batch without ever
/// waiting (many matches per key): the task running it, and every operator
/// above it in that task, never yields to the runtime, so dropping the
/// statement cannot stop it and timers, signals and other tasks on that
/// worker wait. Above a join, `CooperativeExec` spends Tokio's task budget
/// on each batch and yields when it is spent; the rows do not change.
/// `lance-sql` installs it so that Ctrl-C stops any statement within moments.
#[derive(Debug, Default)]
pub struct YieldAboveJoins {}

impl PhysicalOptimizerRule for YieldAboveJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let plan = with_yield_points(plan)?;
        Ok(if produces_freely(plan.as_ref()) {
            Arc::new(CooperativeExec::new(plan))
        } else {
            plan
        })
    }

    fn name(&self) -> &str {
        "YieldAboveJoins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with a `CooperativeExec` above each child that may emit freely
/// (and is not below one already), at every level.
fn with_yield_points(plan: Arc<dyn ExecutionPlan>) -> DFResult<Arc<dyn ExecutionPlan>> {
    let coop = plan.is::<CooperativeExec>();
    let mut changed = false;
    let mut children = Vec::with_capacity(plan.children().len());
    for child in plan.children() {
        let mut new = with_yield_points(Arc::clone(child))?;
        if !coop && produces_freely(new.as_ref()) {
            new = Arc::new(CooperativeExec::new(new));
        }
        changed |= !Arc::ptr_eq(&new, child);
        children.push(new);
    }
    if changed {
        plan.with_new_children(children)
    } else {
        Ok(plan)
    }
}

/// Whether `node` may emit many batches per batch it reads (joins, unnest).
fn produces_freely(node: &dyn ExecutionPlan) -> bool {
    node.name().ends_with("JoinExec") || node.name() == "UnnestExec"
}

/// Whether running `plan` changes a table: it holds a writing node of this
/// crate (any `Lance*` or `Cloud*` node but the scans and searches) or
/// DataFusion's `DataSinkExec`. A cancelled statement that writes is given the time to
/// fail and remove its files; one that only reads can simply be dropped.
pub fn writes(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let name = plan.name();
    let writer = ((name.starts_with("Lance") || name.starts_with("Cloud"))
        && !matches!(
            name,
            "LanceScanExec" | "LanceSearchExec" | "CloudScanExec" | "CloudSearchExec"
        ))
        || name == "DataSinkExec";
    writer || plan.children().into_iter().any(writes)
}

/// `stream`, ending in an error naming the cancellation once the statement
/// of `context` is cancelled (unchanged when it has no [`Cancellation`]).
pub(crate) fn cancellable(
    stream: SendableRecordBatchStream,
    context: &TaskContext,
) -> SendableRecordBatchStream {
    let Some(cancellation) = Cancellation::of(context) else {
        return stream;
    };
    let schema = stream.schema();
    let until = Arc::clone(&cancellation);
    let stream = stream
        .take_until(async move { until.cancelled().await })
        .map(Some)
        .chain(futures::stream::once(async move {
            cancellation
                .is_cancelled()
                .then(|| Err(DataFusionError::Execution(CANCELLED.to_string())))
        }))
        .filter_map(futures::future::ready);
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::TaskContext;
    use datafusion::prelude::SessionConfig;

    fn endless() -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![1]))],
        )
        .unwrap();
        let batches = futures::stream::repeat_with(move || Ok(batch.clone()));
        Box::pin(RecordBatchStreamAdapter::new(schema, batches))
    }

    #[tokio::test]
    async fn a_cancelled_stream_ends_in_the_cancellation_error() {
        let cancellation = Arc::new(Cancellation::default());
        let config = SessionConfig::new().with_extension(Arc::clone(&cancellation));
        let context = TaskContext::default().with_session_config(config);
        let mut stream = cancellable(endless(), &context);
        for _ in 0..3 {
            assert!(stream.next().await.unwrap().is_ok());
        }
        cancellation.cancel();
        let error = stream.next().await.unwrap().unwrap_err();
        assert!(error.to_string().contains(CANCELLED), "{error}");
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn joins_get_one_yield_point_each() {
        let ctx = SessionContext::new();
        let plan = ctx
            .sql(
                "SELECT count(*) FROM (VALUES (1), (2)) a(x) JOIN (VALUES (1), (3)) b(x) \
                 ON a.x = b.x CROSS JOIN (VALUES (5)) c(y)",
            )
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let rule = YieldAboveJoins::default();
        let once = rule.optimize(plan, &ConfigOptions::default()).unwrap();
        let shown = |p: &Arc<dyn ExecutionPlan>| {
            datafusion::physical_plan::displayable(p.as_ref())
                .indent(false)
                .to_string()
        };
        let text = shown(&once);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let joins = lines.iter().filter(|l| l.contains("JoinExec")).count();
        assert_eq!(joins, 2, "{text}");
        for (i, line) in lines.iter().enumerate() {
            if line.contains("JoinExec") {
                assert!(lines[i - 1].starts_with("CooperativeExec"), "{text}");
            }
        }
        let twice = rule
            .optimize(Arc::clone(&once), &ConfigOptions::default())
            .unwrap();
        assert_eq!(shown(&twice), text);
        assert!(!writes(&once));
    }

    #[tokio::test]
    async fn a_stream_without_a_cancellation_is_unchanged() {
        let mut stream = cancellable(endless(), &TaskContext::default());
        for _ in 0..3 {
            assert!(stream.next().await.unwrap().is_ok());
        }
    }
}
