//! Read-path benchmark: prints the tables quoted in README.md.
//!
//! ```text
//! make bench                                   # 10M rows, 67 fragments, all storage versions
//! cargo bench --bench read -- --rows 2000000   # smaller data
//! cargo bench --bench read -- --iters 3
//! ```
//!
//! For each Lance storage version (2.0, 2.1, 2.2) it runs a scan-bound
//! TPC-H Q6-like query and an aggregation-bound Q1-like query through
//!
//! * this crate's `LanceTableProvider` (fragment groups as partitions),
//! * Lance's own `lance::datafusion::LanceTableProvider`,
//! * DataFusion over the same rows in Parquet,
//!
//! and decodes the queries' columns with Lance's raw `Scanner` (no
//! DataFusion) as the floor. Times are medians; "cores" is CPU time / wall
//! time. A second table measures 24 concurrent opens+scans of a
//! 4,000-fragment table with per-open sessions, one shared Lance session,
//! and this crate's shared session with single-flight loads.
//!
//! Generated data is kept under `target/bench-data` between runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Date32Array, Float64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_lance::{CacheBudgets, LanceSessionCache, LanceTableProvider, VersionSpec};
use futures::{StreamExt, TryStreamExt};
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::session::Session;
use lance_file::version::LanceFileVersion;

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

struct Args {
    rows: usize,
    iters: usize,
    dir: PathBuf,
}

fn args() -> Args {
    let mut out = Args {
        rows: 10_000_000,
        iters: 5,
        dir: PathBuf::from("target/bench-data"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rows" => out.rows = it.next().and_then(|v| v.parse().ok()).expect("--rows N"),
            "--iters" => out.iters = it.next().and_then(|v| v.parse().ok()).expect("--iters N"),
            "--dir" => out.dir = PathBuf::from(it.next().expect("--dir PATH")),
            _ => {} // cargo bench passes --bench
        }
    }
    out
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("l_quantity", DataType::Float64, false),
        Field::new("l_extendedprice", DataType::Float64, false),
        Field::new("l_discount", DataType::Float64, false),
        Field::new("l_tax", DataType::Float64, false),
        Field::new("l_returnflag", DataType::Utf8, false),
        Field::new("l_linestatus", DataType::Utf8, false),
        Field::new("l_shipdate", DataType::Date32, false),
    ]))
}

/// Rows `start..start + n` of a TPC-H-like lineitem (deterministic).
fn lineitem(start: usize, n: usize) -> RecordBatch {
    let r = |i: usize, c: u64| splitmix((i as u64) << 3 | c);
    let rows = start..start + n;
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 0) % 50 + 1) as f64),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone()
                    .map(|i| 900.0 + (r(i, 1) % 10_410_000) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 2) % 11) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 3) % 9) as f64 / 100.0),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.clone()
                    .map(|i| ["A", "N", "R"][(r(i, 4) % 3) as usize]),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.clone().map(|i| ["F", "O"][(r(i, 5) % 2) as usize]),
            )),
            Arc::new(Date32Array::from_iter_values(
                rows.map(|i| 8036 + (r(i, 6) % 2526) as i32),
            )),
        ],
    )
    .expect("lineitem batch")
}

async fn write_lance(uri: &str, rows: usize, per_file: usize, version: LanceFileVersion) {
    let chunk = 100_000.min(rows.max(1));
    let batches: Vec<_> = (0..rows)
        .step_by(chunk)
        .map(|s| Ok(lineitem(s, chunk.min(rows - s))))
        .collect();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: per_file,
        data_storage_version: Some(version),
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new(batches, schema()),
        uri,
        Some(params),
    )
    .await
    .expect("write lance");
}

fn exists(path: &Path) -> bool {
    path.join("_versions").is_dir() || path.is_file()
}

/// CPU time (user + system) of this process.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 (1-based); after ')' they are 12 and 13 (1-based) → 11, 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[derive(Clone, Copy)]
struct Measure {
    wall: Duration,
    cores: f64,
}

async fn measure<F, Fut>(iters: usize, mut f: F) -> Measure
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    f().await; // warm-up
    let mut walls = Vec::with_capacity(iters);
    let cpu0 = cpu_time();
    let total0 = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        f().await;
        walls.push(t.elapsed());
    }
    let total = total0.elapsed();
    let cpu = cpu_time() - cpu0;
    walls.sort();
    Measure {
        wall: walls[walls.len() / 2],
        cores: cpu.as_secs_f64() / total.as_secs_f64().max(1e-9),
    }
}

async fn run_sql(ctx: &SessionContext, sql: &str) -> usize {
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

fn config(partitions: usize) -> SessionConfig {
    SessionConfig::new().with_target_partitions(partitions)
}

fn secs(m: Measure) -> String {
    format!("{:.3} s / {:.1}", m.wall.as_secs_f64(), m.cores)
}

fn ratio(a: Measure, b: Measure) -> String {
    format!("{:.2}×", b.wall.as_secs_f64() / a.wall.as_secs_f64())
}

async fn query_table(args: &Args) {
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

        // Single-partition overhead: our scan of the Q6 columns vs the raw Scanner.
        let one = datafusion_lance::lance_session_context(config(1));
        one.register_table(
            "lineitem",
            Arc::new(LanceTableProvider::try_new(&uri).await.expect("provider")),
        )
        .expect("register");
        let sql = format!("SELECT {} FROM lineitem", Q6_COLUMNS.join(", "));
        let a = measure(args.iters, || async {
            run_sql(&one, &sql).await;
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

async fn count_scan(ds: Arc<Dataset>) -> usize {
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

/// Runs `opens` concurrent open+scan tasks; returns wall time and the distinct
/// sessions' total cache bytes.
async fn concurrent_opens<F, Fut>(opens: usize, open: F) -> (Duration, u64)
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
                count_scan(Arc::clone(&ds)).await;
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

async fn session_table(args: &Args) {
    let path = args.dir.join("many-fragments-4000.lance");
    let uri = path.to_string_lossy().to_string();
    if !exists(&path) {
        write_lance(&uri, 100_000, 25, LanceFileVersion::V2_1).await;
    }
    println!(
        "\n## Opening a 4,000-fragment table ({} MB on disk): 24 concurrent opens + scans\n",
        dir_size(&path) / 1_000_000
    );
    println!("| mode | 1 open: time / session bytes | 24 concurrent: time / session bytes |");
    println!("|---|---|---|");
    let fmt =
        |(t, b): (Duration, u64)| format!("{:.3} s / {:.1} MB", t.as_secs_f64(), b as f64 / 1e6);

    let per_open = |n| {
        let uri = uri.clone();
        async move {
            concurrent_opens(n, || {
                let uri = uri.clone();
                async move { Arc::new(DatasetBuilder::from_uri(&uri).load().await.expect("open")) }
            })
            .await
        }
    };
    let (one, many) = (per_open(1).await, per_open(24).await);
    println!(
        "| per-open Lance sessions (Lance's default) | {} | {} |",
        fmt(one),
        fmt(many)
    );

    let lance_shared = |n| {
        let uri = uri.clone();
        async move {
            let session = Arc::new(Session::default());
            concurrent_opens(n, || {
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
            .await
        }
    };
    let (one, many) = (lance_shared(1).await, lance_shared(24).await);
    println!(
        "| one shared Lance Session | {} | {} |",
        fmt(one),
        fmt(many)
    );

    let normalized = datafusion_lance::session::normalize_uri(&uri).expect("uri");
    let ours = |n| {
        let uri = normalized.clone();
        async move {
            let cache = LanceSessionCache::private(CacheBudgets::from_env());
            let result = concurrent_opens(n, || {
                let (uri, cache) = (uri.clone(), Arc::clone(&cache));
                async move {
                    cache
                        .open(&uri, &Default::default(), &VersionSpec::Latest)
                        .await
                        .expect("open")
                }
            })
            .await;
            (result, cache)
        }
    };
    let ((one, _), (many, cache)) = (ours(1).await, ours(24).await);
    println!(
        "| datafusion-lance shared session (single-flight) | {} | {} |",
        fmt(one),
        fmt(many)
    );

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

fn main() {
    let args = args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        query_table(&args).await;
        session_table(&args).await;
    });
    println!(
        "\nCells: median wall time / cores used (CPU time ÷ wall time). Ratios: how many times faster datafusion-lance is."
    );
}
