//! Read-path tables: TPC-H Q6/Q1-like queries per storage version, and
//! concurrent opens of a 4,000-fragment table.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::physical_plan::execute_stream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_lance::{CacheBudgets, LanceSessionCache, LanceTableProvider, VersionSpec};
use futures::{StreamExt, TryStreamExt};
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::session::Session;
use lance_file::version::LanceFileVersion;

use crate::common::{Args, Measure, exists, measure, write_lance};

const Q6: &str = "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem \
    WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
    AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";
const Q6_COLUMNS: &[&str] = &["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"];

const Q1: &str = "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, \
    sum(l_extendedprice) AS sum_base_price, \
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, \
    avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, \
    avg(l_discount) AS avg_disc, count(*) AS count_order \
    FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' \
    GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus";
const Q1_COLUMNS: &[&str] = &[
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_returnflag",
    "l_linestatus",
    "l_shipdate",
];

pub(crate) async fn run_sql(ctx: &SessionContext, sql: &str) -> usize {
    let df = ctx.sql(sql).await.expect("plan");
    let plan = df.create_physical_plan().await.expect("physical plan");
    let stream = execute_stream(plan, ctx.task_ctx()).expect("execute");
    stream
        .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
        .await
        .expect("run")
}

async fn raw_scan(ds: &Arc<Dataset>, columns: &[&str]) -> usize {
    let mut scanner = ds.scan();
    scanner
        .project(columns)
        .expect("project")
        .scan_in_order(false);
    let stream = scanner.try_into_stream().await.expect("stream");
    stream
        .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
        .await
        .expect("scan")
}

pub(crate) fn config(partitions: usize) -> SessionConfig {
    SessionConfig::new().with_target_partitions(partitions)
}

pub(crate) fn secs(m: Measure) -> String {
    format!("{:.3} s / {:.1}", m.wall.as_secs_f64(), m.cores)
}

fn ratio(a: Measure, b: Measure) -> String {
    format!("{:.2}×", b.wall.as_secs_f64() / a.wall.as_secs_f64())
}

pub(crate) async fn query_table(args: &Args) {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per_file = args.rows.div_ceil(66).max(1);
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let parquet = args.dir.join(format!("lineitem-{}.parquet", args.rows));
    println!(
        "\n## Read path: {} rows, {} fragments of ≤ {per_file} rows, {cpus} cores, {} iterations (median)\n",
        args.rows,
        args.rows.div_ceil(per_file),
        args.iters
    );
    println!(
        "| data | query | datafusion-lance | lance provider | raw Scanner (decode only) | DataFusion + Parquet | vs lance provider | vs Parquet |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut sizes = Vec::new();
    for (label, version) in [
        ("v2.0", LanceFileVersion::V2_0),
        ("v2.1", LanceFileVersion::V2_1),
        ("v2.2", LanceFileVersion::V2_2),
    ] {
        let path = args
            .dir
            .join(format!("lineitem-{label}-{}.lance", args.rows));
        let uri = path.to_string_lossy().to_string();
        if !exists(&path) {
            let t = Instant::now();
            write_lance(&uri, args.rows, per_file, version).await;
            eprintln!("wrote {uri} in {:.1?}", t.elapsed());
        }
        if !exists(&parquet) {
            let ctx = SessionContext::new();
            let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
            ctx.register_table(
                "lineitem",
                Arc::new(lance::datafusion::LanceTableProvider::new(ds, false, false)),
            )
            .expect("register");
            ctx.sql(&format!(
                "COPY (SELECT * FROM lineitem) TO '{}' STORED AS PARQUET",
                parquet.display()
            ))
            .await
            .expect("copy plan")
            .collect()
            .await
            .expect("copy");
        }

        let ours = datafusion_lance::lance_session_context(config(cpus));
        let provider = LanceTableProvider::try_new(&uri).await.expect("provider");
        ours.register_table("lineitem", Arc::new(provider))
            .expect("register");

        let theirs = SessionContext::new_with_config(config(cpus));
        let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
        theirs
            .register_table(
                "lineitem",
                Arc::new(lance::datafusion::LanceTableProvider::new(
                    Arc::clone(&ds),
                    false,
                    false,
                )),
            )
            .expect("register");

        let pq = SessionContext::new_with_config(config(cpus));
        pq.register_parquet(
            "lineitem",
            parquet.to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .expect("parquet");

        for (name, sql, columns) in [("Q6", Q6, Q6_COLUMNS), ("Q1", Q1, Q1_COLUMNS)] {
            let a = measure(args.iters, || async {
                run_sql(&ours, sql).await;
            })
            .await;
            let b = measure(args.iters, || async {
                run_sql(&theirs, sql).await;
            })
            .await;
            let raw = measure(args.iters, || async {
                raw_scan(&ds, columns).await;
            })
            .await;
            let p = measure(args.iters, || async {
                run_sql(&pq, sql).await;
            })
            .await;
            println!(
                "| {label} | {name} | {} | {} | {} | {} | {} | {} |",
                secs(a),
                secs(b),
                secs(raw),
                secs(p),
                ratio(a, b),
                ratio(a, p)
            );
        }

        sizes.push((label, dir_size(&path)));

        // Single-partition overhead: executing our planned scan of the Q6
        // columns (planning excluded) vs the raw Scanner stream.
        let one = datafusion_lance::lance_session_context(config(1));
        one.register_table(
            "lineitem",
            Arc::new(LanceTableProvider::try_new(&uri).await.expect("provider")),
        )
        .expect("register");
        let sql = format!("SELECT {} FROM lineitem", Q6_COLUMNS.join(", "));
        let plan = one
            .sql(&sql)
            .await
            .expect("plan")
            .create_physical_plan()
            .await
            .expect("physical plan");
        let a = measure(args.iters, || async {
            let stream = execute_stream(Arc::clone(&plan), one.task_ctx()).expect("execute");
            let _ = stream
                .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
                .await
                .expect("scan");
        })
        .await;
        let raw = measure(args.iters, || async {
            raw_scan(&ds, Q6_COLUMNS).await;
        })
        .await;
        println!(
            "| {label} | scan of the Q6 columns, 1 partition | {} | | {} | | | overhead vs raw Scanner {:.2}× |",
            secs(a),
            secs(raw),
            a.wall.as_secs_f64() / raw.wall.as_secs_f64()
        );
    }
    println!("\n| data | size on disk | Parquet |");
    println!("|---|---|---|");
    for (label, bytes) in sizes {
        println!(
            "| {label} | {:.0} MB | {:.0} MB |",
            bytes as f64 / 1e6,
            std::fs::metadata(&parquet).map_or(0, |m| m.len()) as f64 / 1e6
        );
    }
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        dir_size(&p)
                    } else {
                        e.metadata().map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

async fn count_scan(ds: Arc<Dataset>, scan: bool) -> usize {
    if !scan {
        return 0;
    }
    let mut scanner = ds.scan();
    scanner
        .project(&["l_quantity"])
        .expect("project")
        .filter("l_quantity < 10")
        .expect("filter");
    scanner
        .try_into_stream()
        .await
        .expect("stream")
        .map(|b| b.map(|b| b.num_rows()).unwrap_or(0))
        .fold(0, |a, n| async move { a + n })
        .await
}

#[derive(Clone, Copy)]
enum Mode {
    PerOpen,
    LanceShared,
    Ours,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::PerOpen => "per-open Lance sessions (Lance's default)",
            Mode::LanceShared => "one shared Lance Session",
            Mode::Ours => "datafusion-lance shared session (single-flight)",
        }
    }
}

/// `n` concurrent cold opens (and scans) in `mode`.
async fn open_mode(
    mode: Mode,
    uri: &str,
    n: usize,
    scan: bool,
) -> ((Duration, u64), Option<Arc<LanceSessionCache>>) {
    let uri = uri.to_string();
    match mode {
        Mode::PerOpen => {
            let r = concurrent_opens(n, scan, || {
                let uri = uri.clone();
                async move { Arc::new(DatasetBuilder::from_uri(&uri).load().await.expect("open")) }
            })
            .await;
            (r, None)
        }
        Mode::LanceShared => {
            let session = Arc::new(Session::default());
            let r = concurrent_opens(n, scan, || {
                let (uri, session) = (uri.clone(), Arc::clone(&session));
                async move {
                    Arc::new(
                        DatasetBuilder::from_uri(&uri)
                            .with_session(session)
                            .load()
                            .await
                            .expect("open"),
                    )
                }
            })
            .await;
            (r, None)
        }
        Mode::Ours => {
            let cache = LanceSessionCache::private(CacheBudgets::from_env());
            let r = concurrent_opens(n, scan, || {
                let (uri, cache) = (uri.clone(), Arc::clone(&cache));
                async move {
                    cache
                        .open(&uri, &Default::default(), &VersionSpec::Latest)
                        .await
                        .expect("open")
                }
            })
            .await;
            (r, Some(cache))
        }
    }
}

/// Runs `opens` concurrent open (+ scan) tasks; returns wall time and the
/// distinct sessions' total cache bytes.
async fn concurrent_opens<F, Fut>(opens: usize, scan: bool, open: F) -> (Duration, u64)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<Dataset>> + Send + 'static,
{
    let barrier = Arc::new(tokio::sync::Barrier::new(opens));
    let t = Instant::now();
    let tasks: Vec<_> = (0..opens)
        .map(|_| {
            let fut = open();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                let ds = fut.await;
                count_scan(Arc::clone(&ds), scan).await;
                ds
            })
        })
        .collect();
    let mut datasets = Vec::new();
    for task in tasks {
        datasets.push(task.await.expect("task"));
    }
    let elapsed = t.elapsed();
    let mut sessions: Vec<Arc<Session>> = Vec::new();
    for ds in &datasets {
        let s = ds.session();
        if !sessions.iter().any(|o| Arc::ptr_eq(o, &s)) {
            sessions.push(s);
        }
    }
    (elapsed, sessions.iter().map(|s| s.size_bytes()).sum())
}

pub(crate) async fn session_table(args: &Args) {
    let path = args.dir.join("many-fragments-4000.lance");
    let uri = path.to_string_lossy().to_string();
    if !exists(&path) {
        write_lance(&uri, 100_000, 25, LanceFileVersion::V2_1).await;
    }
    println!(
        "\n## Opening a 4,000-fragment table ({} MB on disk): 24 concurrent opens + scans\n",
        dir_size(&path) / 1_000_000
    );
    println!(
        "| mode | 24 concurrent cold opens: time / session bytes | 24 concurrent cold opens + scans: time / session bytes | 1 open + scan |"
    );
    println!("|---|---|---|---|");
    let fmt =
        |(t, b): (Duration, u64)| format!("{:.3} s / {:.1} MB", t.as_secs_f64(), b as f64 / 1e6);
    let normalized = datafusion_lance::session::normalize_uri(&uri).expect("uri");
    let mut last_cache = None;
    for mode in [Mode::PerOpen, Mode::LanceShared, Mode::Ours] {
        let mut cells = Vec::new();
        for (n, scan) in [(24, false), (24, true), (1, true)] {
            let (result, cache) = open_mode(mode, &normalized, n, scan).await;
            cells.push(fmt(result));
            last_cache = cache.or(last_cache);
        }
        println!(
            "| {} | {} | {} | {} |",
            mode.label(),
            cells[0],
            cells[1],
            cells[2]
        );
    }
    let cache = last_cache.expect("ours ran");

    // Warm opens: the version is held; one directory listing, no manifest read.
    let before = (
        cache.opener_stats(),
        cache.session().metadata_cache_stats().await,
    );
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        cache
            .open(&normalized, &Default::default(), &VersionSpec::Latest)
            .await
            .expect("open");
    }
    let per = t.elapsed() / n;
    let after = (
        cache.opener_stats(),
        cache.session().metadata_cache_stats().await,
    );
    println!(
        "\nWarm open (datafusion-lance, table already open): {:.3} ms per open; manifest loads during {n} opens: {}, metadata cache misses: {}",
        per.as_secs_f64() * 1e3,
        after.0.loads - before.0.loads,
        after.1.misses - before.1.misses
    );
}
