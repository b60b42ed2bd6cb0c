//! `lance-sql`: the DataFusion CLI with Lance tables built in.
//!
//! Behaves like `datafusion-cli` (REPL, `-c`, `-f`, `-r`, `--format`, `-q`,
//! `--maxrows`, `--memory-limit`, `--mem-pool-type`, `--disk-limit`, `\`
//! commands), with `STORED AS LANCE`, `lance.*` settings,
//! quoted `.lance` paths, the Lance table functions and `MERGE INTO`
//! available. Exits non-zero when any statement fails. With `--cluster
//! df://HOST:PORT` every statement runs on a Ballista cluster of
//! `lance-cluster` processes.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, GreedyMemoryPool, MemoryPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::logical_expr::ExplainFormat;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_cli::catalog::DynamicObjectStoreCatalog;
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_cli::pool_type::PoolType;
use datafusion_cli::print_format::PrintFormat;
use datafusion_cli::print_options::{MaxRows, PrintOptions};

mod interrupt;
mod repl;
mod serve;
mod statements;

use datafusion::execution::SessionStateBuilder;
use datafusion_lance::cancel::YieldAboveJoins;
use interrupt::Interrupts;
use statements::{Outcome, ProgressMode, Runner};

#[derive(Debug, Parser)]
#[clap(
    name = "lance-sql",
    version,
    about = "SQL over Lance datasets (DataFusion CLI + datafusion-lance)"
)]
struct Args {
    #[clap(subcommand)]
    mode: Option<Mode>,

    /// Execute the given SQL statement(s), then exit.
    #[clap(short = 'c', long, num_args = 0.., value_parser(parse_command))]
    command: Vec<String>,

    /// Execute the statements in these files, then exit.
    #[clap(short, long, num_args = 0.., value_parser(parse_valid_file))]
    file: Vec<String>,

    /// Output format: table, csv, tsv, json, ndjson (or nd-json), automatic.
    #[clap(long, default_value = "automatic", value_parser(parse_format))]
    format: PrintFormat,

    /// Print only results (no banner, no timing).
    #[clap(short, long, global = true)]
    quiet: bool,

    /// Maximum rows shown in table format (a number or 'inf').
    #[clap(long, default_value = "40")]
    maxrows: MaxRows,

    /// Rows per batch (datafusion.execution.batch_size).
    #[clap(short = 'b', long, global = true)]
    batch_size: Option<usize>,

    /// Change to this directory before running (relative paths resolve from it).
    #[clap(short = 'p', long, global = true)]
    data_path: Option<String>,

    /// Enable syntax highlighting in the REPL.
    #[clap(long)]
    color: bool,

    /// Run every statement on the Ballista cluster whose scheduler is at
    /// this URL (df://HOST:PORT; see `lance-cluster`).
    #[clap(long, global = true)]
    cluster: Option<String>,

    /// Memory DataFusion's operators may use (e.g. 256M, 4G): sorts, joins
    /// and aggregates spill to disk past it. No limit by default.
    #[clap(short = 'm', long, value_parser(parse_memory_limit), global = true)]
    memory_limit: Option<usize>,

    /// How --memory-limit is shared between operators: greedy or fair.
    #[clap(long, default_value_t = PoolType::Greedy, global = true)]
    mem_pool_type: PoolType,

    /// Most bytes of temporary spill files (e.g. 20G).
    #[clap(long, value_parser(parse_disk_limit), global = true)]
    disk_limit: Option<usize>,

    /// Run these files on startup (register tables, set options) instead of
    /// ~/.lance-sqlrc.
    #[clap(short = 'r', long, num_args = 0.., value_parser(parse_valid_file), global = true)]
    rc: Option<Vec<String>>,

    /// Attach the Lance namespace at ROOT as catalog NAME (repeatable): a
    /// directory namespace's root (path or object-store URL) or a REST
    /// namespace server as rest+http://HOST:PORT, or a LanceDB Cloud or
    /// Enterprise database as db://DATABASE[/PREFIX] (key from
    /// LANCEDB_API_KEY). Its root's tables are NAME.public.t, a child
    /// namespace's NAME.<schema>.t.
    #[clap(
        long = "catalog",
        value_name = "NAME=ROOT",
        value_parser(parse_catalog),
        global = true
    )]
    catalogs: Vec<(String, String)>,

    /// Show a live progress line (rows read and written, fragments
    /// written, elapsed) on stderr for statements running longer than 2 s:
    /// auto = when stderr is a terminal.
    #[clap(long, value_enum, default_value_t = ProgressMode::Auto)]
    progress: ProgressMode,
}

/// What `lance-sql` does instead of running statements.
#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Serve SQL to network clients (Arrow Flight SQL, the Postgres wire
    /// protocol): the same SQL, tables
    /// and settings as the CLI, a session per client. The options above
    /// (--catalog, -r, --memory-limit, --cluster, ...) apply to every
    /// session.
    Serve(serve::ServeArgs),
}

/// `NAME=ROOT` of `--catalog`.
fn parse_catalog(arg: &str) -> std::result::Result<(String, String), String> {
    match arg.split_once('=') {
        Some((name, root)) if !name.is_empty() && !root.is_empty() => {
            Ok((name.to_string(), root.to_string()))
        }
        _ => Err(format!(
            "--catalog '{arg}': expected NAME=ROOT, e.g. lake=/data/lake or \
             lake=rest+http://127.0.0.1:2333"
        )),
    }
}

/// Bytes in `size`: a number with an optional K, M, G or T suffix (powers
/// of 1024; `B`/`KB`/... accepted too).
fn parse_size(size: &str, what: &str) -> std::result::Result<usize, String> {
    let lower = size.trim().to_ascii_lowercase();
    let digits = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits);
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" => 10,
        "m" | "mb" => 20,
        "g" | "gb" => 30,
        "t" | "tb" => 40,
        _ => return Err(format!("invalid {what} '{size}' (e.g. 512M, 4G)")),
    };
    let number: usize = number
        .parse()
        .map_err(|_| format!("invalid {what} '{size}' (e.g. 512M, 4G)"))?;
    number
        .checked_mul(1usize << shift)
        .ok_or_else(|| format!("{what} '{size}' is too large"))
}

fn parse_memory_limit(size: &str) -> std::result::Result<usize, String> {
    parse_size(size, "memory limit")
}

fn parse_disk_limit(size: &str) -> std::result::Result<usize, String> {
    parse_size(size, "disk limit")
}

fn parse_command(command: &str) -> std::result::Result<String, String> {
    if command.trim().is_empty() {
        Err("-c expects a non-empty SQL statement".to_string())
    } else {
        Ok(command.to_string())
    }
}

fn parse_valid_file(path: &str) -> std::result::Result<String, String> {
    if Path::new(path).is_file() {
        Ok(path.to_string())
    } else {
        Err(format!("Invalid file '{path}'"))
    }
}

fn parse_format(format: &str) -> std::result::Result<PrintFormat, String> {
    match format.to_ascii_lowercase().as_str() {
        "ndjson" => Ok(PrintFormat::NdJson),
        other => other.parse(),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::FAILURE,
        // As a shell reports a command ended by SIGINT.
        Ok(Outcome::Cancelled) => ExitCode::from(130),
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the CLI: how its statements ended (the worst of them).
async fn main_inner() -> Result<Outcome> {
    let args = Args::parse();
    if let Some(dir) = &args.data_path {
        std::env::set_current_dir(dir)?;
    }
    if let Some(Mode::Serve(serve_args)) = &args.mode {
        serve::run(&args, serve_args).await?;
        return Ok(Outcome::Done);
    }
    statements::set_progress(args.progress);
    let interrupts = Interrupts::install()?;
    let registry = Arc::new(InstrumentedObjectStoreRegistry::new());
    let runtime = runtime_env(&args, Arc::clone(&registry))?;
    let ctx = new_context(&args, runtime).await?;
    for (name, root) in &args.catalogs {
        tokio::select! {
            attached = datafusion_lance::register_lance_catalog(&ctx, name, root, Default::default()) => {
                attached?;
            }
            () = interrupts.next() => return Ok(Outcome::Cancelled),
        }
    }

    if !args.quiet {
        println!("lance-sql (datafusion-lance {})", env!("CARGO_PKG_VERSION"));
    }
    let mut runner = Runner {
        ctx,
        print_options: PrintOptions {
            format: args.format,
            quiet: args.quiet,
            maxrows: args.maxrows,
            color: args.color,
            instrumented_registry: registry,
        },
        interrupts,
    };

    for file in &startup_files(&args) {
        let outcome = run_file(&runner, file).await?;
        if outcome != Outcome::Done {
            return Ok(outcome);
        }
    }

    if args.command.is_empty() && args.file.is_empty() {
        repl::repl(&mut runner)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        return Ok(Outcome::Done);
    }
    let mut outcome = Outcome::Done;
    for file in &args.file {
        match run_file(&runner, file).await? {
            Outcome::Cancelled => return Ok(Outcome::Cancelled),
            Outcome::Failed => outcome = Outcome::Failed,
            Outcome::Done => {}
        }
    }
    for command in &args.command {
        // Like datafusion-cli: the first failing statement ends the run.
        match runner.run_text(command, false).await {
            Outcome::Done => {}
            other => return Ok(other),
        }
    }
    Ok(outcome)
}

/// The runtime every statement (of every session, when serving) shares:
/// object stores, `--memory-limit`, `--disk-limit`.
fn runtime_env(
    args: &Args,
    registry: Arc<InstrumentedObjectStoreRegistry>,
) -> Result<Arc<RuntimeEnv>> {
    let mut runtime = RuntimeEnvBuilder::new().with_object_store_registry(registry as _);
    if let Some(limit) = args.memory_limit {
        let pool: Arc<dyn MemoryPool> = match args.mem_pool_type {
            PoolType::Greedy => Arc::new(GreedyMemoryPool::new(limit)),
            PoolType::Fair => Arc::new(FairSpillPool::new(limit)),
        };
        runtime = runtime.with_memory_pool(pool);
    }
    if let Some(limit) = args.disk_limit {
        runtime = runtime.with_disk_manager_builder(
            DiskManagerBuilder::default()
                .with_mode(DiskManagerMode::OsTmpDirectory)
                .with_max_temp_directory_size(limit as u64),
        );
    }
    runtime.build_arc()
}

/// A new context over `runtime` with this crate registered, the settings
/// of `args` and the environment, quoted-path tables and (with
/// `--cluster`) a Ballista client; without `--catalog`s or startup files.
async fn new_context(args: &Args, runtime: Arc<RuntimeEnv>) -> Result<SessionContext> {
    let mut options = datafusion::config::ConfigOptions::from_env()?;
    if let Some(batch_size) = args.batch_size {
        if batch_size == 0 {
            return Err(DataFusionError::Configuration(
                "batch size must be greater than 0".into(),
            ));
        }
        options.execution.batch_size = batch_size;
    }
    if std::env::var_os("DATAFUSION_EXPLAIN_FORMAT").is_none() {
        options.explain.format = ExplainFormat::Indent;
    }
    if std::env::var_os("DATAFUSION_FORMAT_NULL").is_none() {
        options.format.null = String::from("NULL");
    }
    let config = SessionConfig::from(options).with_information_schema(true);
    // Joins yield to the runtime now and then, so Ctrl-C can stop them.
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(runtime)
        .with_default_features()
        .with_physical_optimizer_rule(Arc::new(YieldAboveJoins::default()))
        .build();
    let ctx = SessionContext::new_with_state(state);
    datafusion_lance::register_lance(&ctx)?;
    let ctx = match &args.cluster {
        Some(url) => datafusion_lance::cluster::ballista::connect(url, ctx.state()).await?,
        None => ctx,
    };
    let ctx = datafusion_lance::catalogs::enable_lance_url_tables(ctx);
    ctx.register_catalog_list(Arc::new(DynamicObjectStoreCatalog::new(
        Arc::clone(ctx.state().catalog_list()),
        ctx.state_weak_ref(),
    )));
    Ok(ctx)
}

/// The startup files: `-r`, or `~/.lance-sqlrc` when there is one.
fn startup_files(args: &Args) -> Vec<String> {
    args.rc.clone().unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(|home| Path::new(&home).join(".lance-sqlrc"))
            .filter(|path| path.is_file())
            .map(|path| vec![path.to_string_lossy().into_owned()])
            .unwrap_or_default()
    })
}

/// Runs a script statement by statement. A failing statement is reported on
/// stderr and the script goes on (the outcome then reports the failure);
/// Ctrl-C stops it.
async fn run_file(runner: &Runner, path: &str) -> Result<Outcome> {
    let text = std::fs::read_to_string(path)?;
    // A `#!` first line makes a script executable.
    let text = match text.strip_prefix("#!") {
        Some(rest) => rest.split_once('\n').map_or("", |(_, body)| body),
        None => &text,
    };
    Ok(runner.run_text(text, true).await)
}
