//! Running one statement: planned by datafusion-lance or DataFusion,
//! executed here (with a live progress line on a terminal) or, for DDL and
//! other commands, by datafusion-cli.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use datafusion::error::Result;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::SessionContext;
use datafusion_cli::exec;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::PrintOptions;
use datafusion_lance::progress::ProgressLine;
use futures::StreamExt;

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

/// The progress line of one statement, taken down before its first output.
#[derive(Clone)]
struct Progress(Arc<Mutex<Option<ProgressLine>>>);

impl Progress {
    fn start() -> Self {
        let line = PROGRESS
            .get()
            .copied()
            .flatten()
            .map(|delay| ProgressLine::start(Box::new(std::io::stderr()), delay));
        Self(Arc::new(Mutex::new(line)))
    }

    /// Erases the line (for good).
    fn done(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// Runs one statement (`MERGE INTO`, time travel and catalog DDL are
/// planned by datafusion-lance, the rest by DataFusion); reports errors on
/// stderr.
pub(crate) async fn run_statement(
    ctx: &SessionContext,
    sql: String,
    print_options: &PrintOptions,
) -> bool {
    let progress = Progress::start();
    let result = match datafusion_lance::plan_lance_sql(&ctx.state(), &sql).await {
        Ok(Some(plan)) => run_plan(ctx, plan, print_options, &progress).await,
        Ok(None) => run_datafusion(ctx, sql, print_options, &progress).await,
        Err(e) => Err(e),
    };
    progress.done();
    match result {
        Ok(()) => true,
        Err(e) => {
            eprintln!("Error: {e}");
            false
        }
    }
}

/// Executes a planned statement and prints its rows like datafusion-cli.
async fn run_plan(
    ctx: &SessionContext,
    plan: LogicalPlan,
    print_options: &PrintOptions,
    progress: &Progress,
) -> Result<()> {
    let started = std::time::Instant::now();
    let df = datafusion_lance::execute_lance_plan(ctx, plan).await?;
    let format = ctx.state().config_options().format.clone();
    if streams(print_options) {
        let stream = df.execute_stream().await?;
        let stream = done_at_first_batch(stream, progress.clone());
        return print_options.print_stream(stream, started, &format).await;
    }
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await?;
    progress.done();
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    print_options.print_batches(schema, &batches, started, rows, &format)
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

/// Whether results print batch by batch as they arrive: every row of every
/// batch for csv, tsv, json and ndjson (datafusion-cli 54 keeps only the
/// first batches past `--maxrows` and holds the result in memory).
fn streams(print_options: &PrintOptions) -> bool {
    !matches!(
        print_options.format,
        PrintFormat::Table | PrintFormat::Automatic
    )
}

/// Runs what DataFusion plans: queries, DML and `COPY ... STORED AS LANCE`
/// here (streamed for row formats, with progress); DDL, `SET`, `EXPLAIN`,
/// other `COPY`s (which may need datafusion-cli to register their object
/// store) through datafusion-cli.
async fn run_datafusion(
    ctx: &SessionContext,
    sql: String,
    print_options: &PrintOptions,
    progress: &Progress,
) -> Result<()> {
    let plan = ctx.state().create_logical_plan(&sql).await?;
    let ours = match &plan {
        LogicalPlan::Ddl(_)
        | LogicalPlan::Statement(_)
        | LogicalPlan::Explain(_)
        | LogicalPlan::Analyze(_)
        | LogicalPlan::DescribeTable(_) => false,
        LogicalPlan::Copy(copy) => copy.file_type.get_ext().eq_ignore_ascii_case("lance"),
        _ => true,
    };
    if ours {
        return run_plan(ctx, plan, print_options, progress).await;
    }
    progress.done();
    exec::exec_from_commands(ctx, vec![sql], print_options).await
}
