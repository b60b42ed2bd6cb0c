//! Read-path tables: TPC-H Q6/Q1-like queries per storage version, and
//! concurrent opens of a 4,000-fragment table.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::physical_plan::execute_stream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_lance::options::CacheBudgets;
use datafusion_lance::{LanceSessionCache, LanceTableProvider, VersionSpec};
use futures::{StreamExt, TryStreamExt};
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::session::Session;
use lance_file::version::LanceFileVersion;

use crate::common::{
    Args, Stats, exists, interleaved, ratio, schema, side, write_lance, write_lance_as,
};

pub(crate) const Q6: &str = "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem \
    WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' \
    AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24";
const Q6_COLUMNS: &[&str] = &["l_quantity", "l_extendedprice", "l_discount", "l_shipdate"];

pub(crate) const Q1: &str = "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, \
    sum(l_extendedprice) AS sum_base_price, \
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, \
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, \
    avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, \
    avg(l_discount) AS avg_disc, count(*) AS count_order \
    FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' \
    GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus";

/// A one-column aggregate: decoding one column and little else.
const SUM: &str = "SELECT sum(l_extendedprice) AS total FROM lineitem";

/// The lineitem schema with Lance's full-zip structural encoding chosen for
/// the fixed-width columns (Lance 2.1 otherwise picks mini-blocks, which
/// bit-pack these values).
fn fullzip_schema() -> arrow_schema::SchemaRef {
    let plain = schema();
    let fields = plain.fields().iter().map(|f| {
        let f = f.as_ref().clone();
        if f.data_type().is_primitive() {
            f.with_metadata(
                [(
                    "lance-encoding:structural-encoding".to_string(),
                    "fullzip".to_string(),
                )]
                .into(),
            )
        } else {
            f
        }
    });
    Arc::new(arrow_schema::Schema::new(fields.collect::<Vec<_>>()))
}

pub(crate) async fn run_sql(ctx: &SessionContext, sql: &str) -> usize {
    let df = ctx.sql(sql).await.expect("plan");
    let plan = df.create_physical_plan().await.expect("physical plan");
    let stream = execute_stream(plan, ctx.task_ctx()).expect("execute");
    stream
        .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
        .await
        .expect("run")
}

/// Lance's own scanner with the given knobs (no DataFusion), decoding
/// `columns`: the floor under any SQL engine on top of it.
fn raw_scanner(
    ds: &Arc<Dataset>,
    columns: &[&str],
    knobs: Knobs,
) -> lance::dataset::scanner::Scanner {
    let mut scanner = ds.scan();
    scanner
        .project(columns)
        .expect("project")
        .scan_in_order(false);
    if let Some(rows) = knobs.batch_size {
        scanner.batch_size(rows);
    }
    if let Some(n) = knobs.fragment_readahead {
        scanner.fragment_readahead(n);
    }
    scanner
}

/// Scanner settings both sides of a like-for-like comparison use.
#[derive(Clone, Copy, Default)]
struct Knobs {
    batch_size: Option<usize>,
    fragment_readahead: Option<usize>,
}

pub(crate) fn config(partitions: usize) -> SessionConfig {
    SessionConfig::new().with_target_partitions(partitions)
}

/// Lance's own provider: as users get it (`new`: ordered scan) or unordered.
fn lance_provider(ds: &Arc<Dataset>, ordered: bool) -> Arc<lance::datafusion::LanceTableProvider> {
    Arc::new(lance::datafusion::LanceTableProvider::new_with_ordering(
        Arc::clone(ds),
        false,
        false,
        ordered,
    ))
}

fn context_with(
    table: Arc<dyn datafusion::datasource::TableProvider>,
    cpus: usize,
) -> SessionContext {
    let ctx = SessionContext::new_with_config(config(cpus));
    ctx.register_table("lineitem", table).expect("register");
    ctx
}

pub(crate) async fn query_table(args: &Args) {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per_file = args.rows.div_ceil(66).max(1);
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let parquet = args.dir.join(format!("lineitem-{}.parquet", args.rows));
    println!(
        "\n## Read path: {} rows, {} fragments of ≤ {per_file} rows, {cpus} cores\n",
        args.rows,
        args.rows.div_ceil(per_file),
    );
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores used. Lance's provider appears \
         as users get it (`LanceTableProvider::new`: ordered scan) and unordered \
         (`new_with_ordering(.., false)`); ratios are datafusion-lance's time ÷ the unordered \
         provider's (and ÷ Parquet's).\n",
        args.iters
    );
    println!(
        "| data | query | datafusion-lance | Lance provider (ordered, default) | Lance provider (unordered) | DataFusion + Parquet | DataFusion + Parquet, no string views | ÷ Lance unordered | ÷ Parquet | ÷ Parquet, no string views |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut sizes = Vec::new();
    let mut overheads = Vec::new();
    for (label, version, layout) in [
        ("v2.0", LanceFileVersion::V2_0, schema()),
        ("v2.1", LanceFileVersion::V2_1, schema()),
        ("v2.2", LanceFileVersion::V2_2, schema()),
        (
            "v2.1, full-zip numbers",
            LanceFileVersion::V2_1,
            fullzip_schema(),
        ),
    ] {
        let name = label.replace(", full-zip numbers", "-fullzip");
        let path = args
            .dir
            .join(format!("lineitem-{name}-{}.lance", args.rows));
        let uri = path.to_string_lossy().to_string();
        if !exists(&path) {
            let t = Instant::now();
            write_lance_as(&uri, args.rows, per_file, version, layout).await;
            eprintln!("wrote {uri} in {:.1?}", t.elapsed());
        }
        let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
        if !exists(&parquet) {
            let ctx = context_with(lance_provider(&ds, false), cpus);
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
        let ordered = context_with(lance_provider(&ds, true), cpus);
        let unordered = context_with(lance_provider(&ds, false), cpus);
        let pq = SessionContext::new_with_config(config(cpus));
        pq.register_parquet(
            "lineitem",
            parquet.to_str().unwrap(),
            ParquetReadOptions::default(),
        )
        .await
        .expect("parquet");
        // As DataFusion read Parquet before string views were its default.
        let mut plain = config(cpus);
        plain
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = false;
        let pq_plain = SessionContext::new_with_config(plain);
        pq_plain
            .register_parquet(
                "lineitem",
                parquet.to_str().unwrap(),
                ParquetReadOptions::default(),
            )
            .await
            .expect("parquet");

        for (name, sql) in [("Q6", Q6), ("Q1", Q1), ("sum(l_extendedprice)", SUM)] {
            let stats = interleaved(
                args.iters,
                &mut [
                    side(|| async {
                        run_sql(&ours, sql).await;
                    }),
                    side(|| async {
                        run_sql(&ordered, sql).await;
                    }),
                    side(|| async {
                        run_sql(&unordered, sql).await;
                    }),
                    side(|| async {
                        run_sql(&pq, sql).await;
                    }),
                    side(|| async {
                        run_sql(&pq_plain, sql).await;
                    }),
                ],
            )
            .await;
            println!(
                "| {label} | {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
                stats[0].cell(),
                stats[1].cell(),
                stats[2].cell(),
                stats[3].cell(),
                stats[4].cell(),
                ratio(&stats[0], &stats[2]),
                ratio(&stats[0], &stats[3]),
                ratio(&stats[0], &stats[4])
            );
        }
        sizes.push((label, dir_size(&path)));
        overheads.push((label, scan_overhead(args, &uri, &ds).await));
    }

    println!(
        "\nOne partition, the Q6 columns decoded and nothing else: `SELECT <columns> FROM lineitem` \
         through datafusion-lance vs Lance's `Scanner` with the same batch size (32768 rows) and \
         fragment readahead (1), both planned inside the timing ({} interleaved runs).\n",
        args.iters
    );
    println!("| data | datafusion-lance scan | raw Scanner | ÷ raw Scanner |");
    println!("|---|---|---|---|");
    for (label, (a, raw)) in overheads {
        println!(
            "| {label} | {} | {} | {} |",
            a.cell(),
            raw.cell(),
            ratio(&a, &raw)
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

/// Single-partition scan of the Q6 columns: ours vs the raw Scanner, same
/// knobs, both planned inside the timing (our scan node plans a Lance
/// scanner when it executes, like the raw side).
async fn scan_overhead(args: &Args, uri: &str, ds: &Arc<Dataset>) -> (Stats, Stats) {
    let knobs = Knobs {
        batch_size: Some(32768),
        fragment_readahead: Some(1),
    };
    let one = datafusion_lance::lance_session_context(config(1));
    for setting in [
        format!("SET lance.batch_size = {}", knobs.batch_size.unwrap()),
        format!(
            "SET lance.fragment_readahead = {}",
            knobs.fragment_readahead.unwrap()
        ),
    ] {
        one.sql(&setting).await.expect("setting");
    }
    one.register_table(
        "lineitem",
        Arc::new(LanceTableProvider::try_new(uri).await.expect("provider")),
    )
    .expect("register");
    let sql = format!("SELECT {} FROM lineitem", Q6_COLUMNS.join(", "));
    let stats = interleaved(
        args.iters,
        &mut [
            side(|| async {
                run_sql(&one, &sql).await;
            }),
            side(|| async {
                let stream = raw_scanner(ds, Q6_COLUMNS, knobs)
                    .try_into_stream()
                    .await
                    .expect("stream");
                stream
                    .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
                    .await
                    .expect("scan");
            }),
        ],
    )
    .await;
    (stats[0], stats[1])
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
        "Each cell: median of {} interleaved cold runs (min–max) / bytes held by the sessions \
         (median). Every run starts with new sessions.\n",
        args.iters
    );
    println!(
        "| mode | 24 concurrent cold opens | 24 concurrent cold opens + scans | 1 open + scan |"
    );
    println!("|---|---|---|---|");
    let normalized = datafusion_lance::storage::normalize_uri(&uri).expect("uri");
    let modes = [Mode::PerOpen, Mode::LanceShared, Mode::Ours];
    let shapes = [(24, false), (24, true), (1, true)];
    // [mode][shape] -> (times, bytes)
    let mut runs = vec![vec![(Vec::new(), Vec::new()); shapes.len()]; modes.len()];
    let mut last_cache = None;
    for round in 0..=args.iters {
        for (m, mode) in modes.iter().enumerate() {
            for (s, &(n, scan)) in shapes.iter().enumerate() {
                let ((time, bytes), cache) = open_mode(*mode, &normalized, n, scan).await;
                last_cache = cache.or(last_cache);
                if round > 0 {
                    // round 0 warms the OS page cache for every mode alike
                    runs[m][s].0.push(time);
                    runs[m][s].1.push(bytes);
                }
            }
        }
    }
    for (m, mode) in modes.iter().enumerate() {
        let cells: Vec<String> = runs[m]
            .iter()
            .map(|(times, bytes)| {
                let stats = Stats::from_runs(times.clone(), Duration::ZERO);
                let mut bytes = bytes.clone();
                bytes.sort_unstable();
                format!(
                    "{:.3} s ({:.3}–{:.3}) / {:.1} MB",
                    stats.median.as_secs_f64(),
                    stats.min.as_secs_f64(),
                    stats.max.as_secs_f64(),
                    bytes[bytes.len() / 2] as f64 / 1e6
                )
            })
            .collect();
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
    let n = 200u32;
    let mut batches = Vec::new();
    for _ in 0..args.iters.max(1) {
        let t = Instant::now();
        for _ in 0..n {
            cache
                .open(&normalized, &Default::default(), &VersionSpec::Latest)
                .await
                .expect("open");
        }
        batches.push(t.elapsed() / n);
    }
    let per = Stats::from_runs(batches, Duration::ZERO);
    let after = (
        cache.opener_stats(),
        cache.session().metadata_cache_stats().await,
    );
    println!(
        "\nWarm open (datafusion-lance, table already open): {:.3} ms per open (median of {} \
         batches of {n}, {:.3}–{:.3}); manifest loads during these opens: {}, metadata cache misses: {}",
        per.median.as_secs_f64() * 1e3,
        args.iters.max(1),
        per.min.as_secs_f64() * 1e3,
        per.max.as_secs_f64() * 1e3,
        after.0.loads - before.0.loads,
        after.1.misses - before.1.misses
    );
}
