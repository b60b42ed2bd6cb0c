//! Running statements: planned by datafusion-lance or DataFusion, executed
//! here (with a live progress line on a terminal) or, for DDL and other
//! commands, by datafusion-cli; cancelled by Ctrl-C.

use std::io::IsTerminal;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result;
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, SendableRecordBatchStream, execute_stream};
use datafusion::prelude::SessionContext;
use datafusion_cli::exec;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};
use datafusion_lance::cancel::{self, Cancellation};
use datafusion_lance::progress::{ProgressLine, WatchedPlan};
use futures::StreamExt;

use crate::interrupt::Interrupts;
use datafusion_lance::split_statements;

/// When statements show a live progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProgressMode {
    /// When stderr is a terminal.
    Auto,
    Always,
    Never,
}

/// How long a statement runs before its progress line shows.
const PROGRESS_DELAY: Duration = Duration::from_secs(2);

/// How long a cancelled statement that writes is given to fail and remove
/// what it wrote (a second Ctrl-C stops waiting).
const WRITE_GRACE: Duration = Duration::from_secs(10);

/// The delay before progress lines, `None` when they are off (set once).
static PROGRESS: OnceLock<Option<Duration>> = OnceLock::new();

/// Sets when progress lines show. `LANCE_SQL_PROGRESS_DELAY_MS` overrides
/// the 2 s delay (0 = from the start; for tests).
pub(crate) fn set_progress(mode: ProgressMode) {
    let on = match mode {
        ProgressMode::Auto => std::io::stderr().is_terminal(),
        ProgressMode::Always => true,
        ProgressMode::Never => false,
    };
    let delay = std::env::var("LANCE_SQL_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(PROGRESS_DELAY);
    let _ = PROGRESS.set(on.then_some(delay));
}

/// The progress line of one statement, taken down before its first output,
/// and the plan whose metrics it shows.
#[derive(Clone)]
struct Progress(Arc<Mutex<Option<ProgressLine>>>, Arc<WatchedPlan>);

impl Progress {
    fn start() -> Self {
        let plan = Arc::new(WatchedPlan::default());
        let line = PROGRESS.get().copied().flatten().map(|delay| {
            ProgressLine::start(Box::new(std::io::stderr()), delay, Arc::clone(&plan))
        });
        Self(Arc::new(Mutex::new(line)), plan)
    }

    /// Shows the progress of `plan` (the statement's, about to run).
    fn watch(&self, plan: &Arc<dyn ExecutionPlan>) {
        self.1.set(Arc::clone(plan));
    }

    /// Erases the line (for good).
    fn done(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// How a statement (or a run of them) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done,
    /// It failed; the error was reported on stderr.
    Failed,
    /// Ctrl-C cancelled it.
    Cancelled,
}

/// What runs statements: the context, how results print, and Ctrl-C.
pub(crate) struct Runner {
    pub(crate) ctx: SessionContext,
    pub(crate) print_options: PrintOptions,
    pub(crate) interrupts: Arc<Interrupts>,
}

impl Runner {
    /// Runs the statements of `text` in order. With `keep_going`, a failed
    /// statement is reported and the next one runs (as in `-f` scripts);
    /// otherwise the first failure ends the run. Ctrl-C always ends it.
    /// Returns the worst outcome.
    pub(crate) async fn run_text(&self, text: &str, keep_going: bool) -> Outcome {
        let dialect = self.ctx.state().config_options().sql_parser.dialect;
        let statements = match datafusion::sql::sqlparser::dialect::dialect_from_str(dialect) {
            Some(dialect) => split_statements(text, dialect.as_ref()),
            None => vec![text.to_string()],
        };
        let mut outcome = Outcome::Done;
        for statement in statements {
            match self.run_statement(statement).await {
                Outcome::Done => {}
                Outcome::Failed if keep_going => outcome = Outcome::Failed,
                other => return other,
            }
        }
        outcome
    }

    /// Runs one statement (`MERGE INTO`, time travel and catalog DDL are
    /// planned by datafusion-lance, the rest by DataFusion); reports errors
    /// on stderr. Ctrl-C cancels it: a statement that only reads is dropped
    /// at once; one that writes is told to stop and given the time to fail
    /// like any failed statement (nothing committed, its files removed) —
    /// unless it had committed already.
    pub(crate) async fn run_statement(&self, sql: String) -> Outcome {
        let cancellation = Cancellation::install(&self.ctx);
        let progress = Progress::start();
        let writes = AtomicBool::new(false);
        let mut work = pin!(self.execute(&sql, &progress, &writes));
        let interrupted = self.interrupts.next();
        let result = tokio::select! {
            result = &mut work => Some(result),
            () = interrupted => {
                cancellation.cancel();
                if writes.load(Ordering::SeqCst) {
                    tokio::select! {
                        result = &mut work => Some(result),
                        () = self.interrupts.next() => None,
                        () = tokio::time::sleep(WRITE_GRACE) => None,
                    }
                } else {
                    None
                }
            }
        };
        progress.done();
        match result {
            Some(Ok(())) => Outcome::Done,
            Some(Err(e)) if cancellation.is_cancelled() => {
                if e.to_string().contains(cancel::CANCELLED) {
                    eprintln!("^C\nCancelled: nothing was committed");
                } else {
                    eprintln!("^C\nCancelled: {e}");
                }
                Outcome::Cancelled
            }
            Some(Err(e)) => {
                eprintln!("Error: {e}");
                Outcome::Failed
            }
            None if writes.load(Ordering::SeqCst) => {
                eprintln!(
                    "^C\nCancelled while writing: files it wrote may be left behind \
                     (lance_vacuum removes them)"
                );
                Outcome::Cancelled
            }
            None => {
                eprintln!("^C");
                Outcome::Cancelled
            }
        }
    }

    /// Plans `sql` once, through this crate's front door, and runs it.
    async fn execute(&self, sql: &str, progress: &Progress, writes: &AtomicBool) -> Result<()> {
        let ctx = &self.ctx;
        let plan = datafusion_lance::plan_sql(&ctx.state(), sql).await?;
        if needs_object_store(&plan) {
            // datafusion-cli registers the object store a table or COPY of
            // another format names (it plans the text itself).
            progress.done();
            return exec::exec_from_commands(ctx, vec![sql.to_string()], &self.print_options).await;
        }
        // Like datafusion-cli: SHOW and plans print every row.
        let every_row = sql
            .trim_start()
            .get(..4)
            .is_some_and(|w| w.eq_ignore_ascii_case("show"))
            || matches!(
                plan,
                LogicalPlan::Explain(_) | LogicalPlan::Analyze(_) | LogicalPlan::DescribeTable(_)
            );
        self.run_plan(plan, progress, writes, every_row).await
    }

    /// Executes a planned statement and prints its rows like datafusion-cli:
    /// `csv`, `tsv`, `json` and `ndjson` print every row as batches arrive;
    /// `table` (and `automatic`) the first `--maxrows` rows.
    async fn run_plan(
        &self,
        plan: LogicalPlan,
        progress: &Progress,
        writes: &AtomicBool,
        every_row: bool,
    ) -> Result<()> {
        let started = datafusion::common::instant::Instant::now();
        let df = datafusion_lance::execute_lance_plan(&self.ctx, plan).await?;
        let task_ctx = Arc::new(df.task_ctx());
        let physical = df.create_physical_plan().await?;
        writes.store(cancel::writes(&physical), Ordering::SeqCst);
        progress.watch(&physical);
        let stream = execute_stream(physical, task_ctx)?;
        let format = self.ctx.state().config_options().format.clone();
        let options = &self.print_options;
        if !matches!(options.format, PrintFormat::Table | PrintFormat::Automatic) {
            let stream = done_at_first_batch(stream, progress.clone());
            return options.print_stream(stream, started, &format).await;
        }
        let maxrows = if every_row {
            MaxRows::Unlimited
        } else {
            options.maxrows
        };
        let schema = stream.schema();
        let (batches, rows) = first_rows(stream, maxrows).await?;
        progress.done();
        let table = PrintOptions {
            format: PrintFormat::Table,
            maxrows,
            ..options.clone()
        };
        table.print_batches(schema, &batches, started, rows, &format)
    }
}

/// Whether `plan` creates a table or copies to a location in an object
/// store (`s3://`, `gs://`, ...) in another format than Lance: datafusion-cli
/// registers that store (Lance opens its own; local files need none).
fn needs_object_store(plan: &LogicalPlan) -> bool {
    let (format, location) = match plan {
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(create)) => {
            (create.file_type.clone(), create.location.as_str())
        }
        LogicalPlan::Copy(copy) => (copy.file_type.get_ext(), copy.output_url.as_str()),
        _ => return false,
    };
    let remote = location
        .split_once("://")
        .is_some_and(|(scheme, _)| !scheme.eq_ignore_ascii_case("file"));
    remote && !format.eq_ignore_ascii_case("lance")
}

/// The batches holding the first `max` rows (whole batches, as
/// datafusion-cli keeps them), and how many rows the stream had in all.
async fn first_rows(
    mut stream: SendableRecordBatchStream,
    max: MaxRows,
) -> Result<(Vec<RecordBatch>, usize)> {
    let max = match max {
        MaxRows::Unlimited => usize::MAX,
        MaxRows::Limited(n) => n,
    };
    let (mut kept, mut rows) = (Vec::new(), 0usize);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let n = batch.num_rows();
        if rows < max {
            kept.push(batch);
        }
        rows += n;
    }
    Ok((kept, rows))
}

/// Takes the progress line down when the first batch (or the end) arrives.
fn done_at_first_batch(
    stream: SendableRecordBatchStream,
    progress: Progress,
) -> SendableRecordBatchStream {
    let schema = stream.schema();
    let last = progress.clone();
    let stream = stream
        .inspect(move |_| progress.done())
        .chain(futures::stream::poll_fn(move |_| {
            last.done();
            std::task::Poll::Ready(None)
        }));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}
