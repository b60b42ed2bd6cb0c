//! Commits under write load: another process appends to the table at a
//! given rate while this one runs 10 statements of one kind with the
//! default commit budget (`lance.commit_max_retries`,
//! `lance.commit_retry_timeout_ms`). For each statement kind: the highest
//! competing-append rate at which 10 of 10 statements commit.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, RecordBatchIterator};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lance::Dataset;
use lance::dataset::{InsertBuilder, WriteDestination, WriteMode, WriteParams};

use crate::common::Args;
use crate::read::config;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Float64, false),
    ]))
}

fn rows(ids: std::ops::Range<i64>) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(Float64Array::from_iter_values(ids.map(|i| i as f64))),
        ],
    )
    .expect("batch")
}

/// Runs in a child process: appends one row `rate` times a second to the
/// table at `uri` until killed (or `seconds` pass).
pub(crate) async fn appender_child(variant: &str) {
    let mut parts = variant.split('|');
    let (uri, rate, seconds): (String, f64, f64) = (
        parts.next().expect("uri").to_string(),
        parts.next().and_then(|r| r.parse().ok()).expect("rate"),
        parts.next().and_then(|s| s.parse().ok()).expect("seconds"),
    );
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let started = Instant::now();
    let mut next = 1_000_000_000i64;
    let params = WriteParams {
        mode: WriteMode::Append,
        ..Default::default()
    };
    let mut dataset = Arc::new(Dataset::open(&uri).await.expect("open"));
    while started.elapsed().as_secs_f64() < seconds {
        ticks.tick().await;
        let appended = InsertBuilder::new(WriteDestination::Dataset(Arc::clone(&dataset)))
            .with_params(&params)
            .execute(vec![rows(next..next + 1)])
            .await;
        next += 1;
        dataset = match appended {
            Ok(new) => Arc::new(new),
            // A lost race beyond Lance's budget: skip this one.
            Err(_) => Arc::new(Dataset::open(&uri).await.expect("open")),
        };
    }
}

fn start_appender(uri: &str, rate: u32) -> Child {
    Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--only",
            "appender-child",
            "--variant",
            &format!("{uri}|{rate}|600"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("appender")
}

async fn latest_version(uri: &str) -> u64 {
    Dataset::open(uri).await.expect("open").version_id()
}

/// Rows of the table the statements change.
const TABLE_ROWS: i64 = 1_000_000;

/// Each statement touches 1% of the table (10,000 rows); `{k}` varies it.
const KINDS: &[(&str, &str)] = &[
    (
        "INSERT",
        "INSERT INTO t SELECT value + 2000000 + {k} * 10000, 0.5 FROM generate_series(0, 9999)",
    ),
    ("DELETE", "DELETE FROM t WHERE id % 100 = {k}"),
    ("UPDATE", "UPDATE t SET v = v + 1 WHERE id % 100 = {k}"),
    (
        "lance_merge",
        "SELECT * FROM lance_merge('t', (SELECT value * 100 + {k} AS id, 7.0 AS v \
         FROM generate_series(0, 9999)), 'id')",
    ),
];

/// One trial: `kind`'s 10 statements against an appender at `rate`.
/// Returns (statements committed, achieved append rate, slowest statement).
async fn trial(args: &Args, kind: &str, template: &str, rate: u32) -> (usize, f64, Duration) {
    let dir = tempfile::Builder::new()
        .prefix("contention-")
        .tempdir_in(&args.dir)
        .expect("dir");
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: (TABLE_ROWS / 10) as usize,
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new([Ok(rows(0..TABLE_ROWS))], schema()),
        uri.as_str(),
        Some(params),
    )
    .await
    .expect("table");
    let ctx = datafusion_lance::lance_session_context(config(2));
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .expect("register");
    if let Some((retries, timeout)) = &args.commit_budget {
        for setting in [
            format!("SET lance.commit_max_retries = {retries}"),
            format!("SET lance.commit_retry_timeout_ms = {timeout}"),
        ] {
            ctx.sql(&setting).await.expect("budget");
        }
    }
    let mut appender = start_appender(&uri, rate);
    // Let the appender reach its pace.
    let v0 = latest_version(&uri).await;
    let warm = Instant::now();
    while latest_version(&uri).await < v0 + 3 && warm.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (v1, t1) = (latest_version(&uri).await, Instant::now());
    let mut committed = 0;
    let mut slowest = Duration::ZERO;
    for k in 0..10 {
        let sql = template.replace("{k}", &(k * 7 + 3).to_string());
        let t = Instant::now();
        let result = match ctx.sql(&sql).await {
            Ok(df) => df.collect().await.map(|_| ()),
            Err(e) => Err(e),
        };
        slowest = slowest.max(t.elapsed());
        match result {
            Ok(()) => committed += 1,
            Err(e) => {
                eprintln!("{kind} at {rate}/s: {e}");
                break;
            }
        }
    }
    let (v2, elapsed) = (latest_version(&uri).await, t1.elapsed());
    let _ = appender.kill();
    let _ = appender.wait();
    let achieved = (v2 - v1).saturating_sub(committed as u64) as f64 / elapsed.as_secs_f64();
    (committed, achieved, slowest)
}

pub(crate) async fn contention_table(args: &Args) {
    let rates = if args.rates.is_empty() {
        vec![25, 50, 100, 200, 300, 500, 1000]
    } else {
        args.rates.clone()
    };
    let budget = match &args.commit_budget {
        Some((r, t)) => {
            format!("lance.commit_max_retries = {r}, lance.commit_retry_timeout_ms = {t}")
        }
        None => "the default commit budget".to_string(),
    };
    println!(
        "\n## Commits under write load: another process appends one row per commit at a set rate; \
         10 statements of each kind, each changing 1% of a 1,000,000-row table (10 fragments), \
         with {budget}\n"
    );
    println!(
        "| statement | highest rate with 10/10 committed (appends/s achieved while the 10 ran) | slowest statement there | first rate that failed: committed |"
    );
    println!("|---|---|---|---|");
    for (kind, template) in KINDS {
        let mut best: Option<(u32, f64, Duration)> = None;
        let mut failed = String::from("none up to the highest rate tried");
        for &rate in &rates {
            let (committed, achieved, slowest) = trial(args, kind, template, rate).await;
            eprintln!(
                "{kind}: {rate}/s (achieved {achieved:.0}/s): {committed}/10, slowest {slowest:.1?}"
            );
            if committed == 10 {
                best = Some((rate, achieved, slowest));
            } else {
                failed = format!("{rate}/s (achieved {achieved:.0}/s): {committed}/10");
                break;
            }
        }
        match best {
            Some((rate, achieved, slowest)) => println!(
                "| {kind} | {rate}/s ({achieved:.0}/s) | {:.2} s | {failed} |",
                slowest.as_secs_f64()
            ),
            None => println!("| {kind} | below {}/s | | {failed} |", rates[0]),
        }
    }
}
