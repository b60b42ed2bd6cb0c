//! **cluster** — the same statements on a Ballista cluster of two executors
//! on loopback (a `lance-cluster` scheduler and two executors, separate
//! processes of this machine) and in one process: the Q6/Q1-like reads, an
//! `INSERT` of every row, and the bytes a scan task carries against the
//! table's manifest. On one 2-core machine the cluster cannot be faster: the
//! ratios measure what the cluster costs (planning on the scheduler, plans
//! encoded per task, shuffles through Flight), not scale-out.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ballista_scheduler::planner::{DefaultDistributedPlanner, DistributedPlanner};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use datafusion_lance::cluster::ballista::{
    cluster_config, connect, physical_codec, scheduler_session,
};
use datafusion_proto::bytes::physical_plan_to_bytes_with_extension_codec;
use lance_file::version::LanceFileVersion;

use crate::common::{Args, Stats, exists, interleaved, ratio, side, side_with_setup, write_lance};
use crate::read::{Q1, Q6, config, run_sql};

/// A scheduler and executors, killed when dropped.
struct Cluster {
    scheduler: SocketAddr,
    processes: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for process in &mut self.processes {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lance-cluster"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lance-cluster")
}

/// The first line `process` prints (within 30 s); the rest is drained.
fn first_line(process: &mut Child) -> String {
    let stdout = process.stdout.take().expect("stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = sender.send(lines.next().and_then(Result::ok).unwrap_or_default());
        lines.for_each(drop);
    });
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("lance-cluster printed nothing within 30 s")
}

/// Executors registered with the scheduler (one bounded REST request).
fn registered(scheduler: SocketAddr) -> usize {
    let Ok(mut stream) = TcpStream::connect_timeout(&scheduler, Duration::from_secs(2)) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request =
        format!("GET /api/executors HTTP/1.1\r\nHost: {scheduler}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.matches("\"id\":").count()
}

impl Cluster {
    /// A scheduler and `executors` executors on 127.0.0.1 with `slots` task
    /// slots each, once all have registered (20 s at most).
    fn start(executors: usize, slots: usize) -> Self {
        let mut cluster = Cluster {
            scheduler: "127.0.0.1:1".parse().expect("address"),
            processes: vec![spawn(&["scheduler", "--bind", "127.0.0.1:0"])],
        };
        let line = first_line(&mut cluster.processes[0]);
        cluster.scheduler = line
            .trim()
            .strip_prefix("lance-cluster scheduler listening on ")
            .unwrap_or_else(|| panic!("scheduler printed {line:?}"))
            .parse()
            .expect("scheduler address");
        let (scheduler, slots) = (cluster.scheduler.to_string(), slots.to_string());
        for _ in 0..executors {
            let mut executor = spawn(&[
                "executor",
                "--scheduler",
                &scheduler,
                "--bind",
                "127.0.0.1:0",
                "--slots",
                &slots,
            ]);
            first_line(&mut executor);
            cluster.processes.push(executor);
        }
        for _ in 0..200 {
            if registered(cluster.scheduler) >= executors {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{executors} executors did not register with {scheduler}");
    }

    async fn client(&self, partitions: usize) -> SessionContext {
        let state = datafusion_lance::lance_session_state(config(partitions));
        connect(&format!("df://{}", self.scheduler), state)
            .await
            .expect("connect to the cluster")
    }
}

/// `0.412 s (0.401–0.430)`: wall time only (the executors' CPU time is
/// not this process's).
fn wall(stats: &Stats) -> String {
    format!(
        "{:.3} s ({:.3}–{:.3})",
        stats.median.as_secs_f64(),
        stats.min.as_secs_f64(),
        stats.max.as_secs_f64()
    )
}

async fn register(ctx: &SessionContext, name: &str, uri: &str) {
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .expect("register");
}

fn latest_version(uri: &str) -> u64 {
    std::fs::read_dir(Path::new(uri).join("_versions"))
        .map(|entries| entries.filter_map(Result::ok).count() as u64)
        .unwrap_or(0)
}

pub(crate) async fn cluster_table(args: &Args) {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per_file = args.rows.div_ceil(66).max(1);
    let path = args.dir.join(format!("lineitem-v2.1-{}.lance", args.rows));
    let uri = path.to_string_lossy().to_string();
    if !exists(&path) {
        write_lance(&uri, args.rows, per_file, LanceFileVersion::V2_1).await;
    }
    let cluster = Cluster::start(2, cpus);
    let local = datafusion_lance::lance_session_context(config(cpus));
    let remote = cluster.client(cpus).await;
    register(&local, "lineitem", &uri).await;
    register(&remote, "lineitem", &uri).await;

    println!(
        "\n## On a cluster: {} rows (v2.1), a scheduler and 2 executors ({cpus} slots each) as \
         separate processes on 127.0.0.1, vs one process; {cpus} partitions both ways\n",
        args.rows
    );
    println!(
        "Both sides share this machine's {cpus} cores: the cluster is not faster here, the ratio \
         is its overhead (scheduler planning, a plan encoded per task, results through Flight). \
         Wall time, median of {} interleaved runs (min–max); ratio: cluster time ÷ one-process \
         time.\n",
        args.iters
    );
    println!("| statement | one process | cluster | cluster ÷ one process | versions created |");
    println!("|---|---|---|---|---|");
    for (name, sql) in [("Q6-like", Q6), ("Q1-like", Q1)] {
        let (l, r) = (&local, &remote);
        let stats = interleaved(
            args.iters,
            &mut [
                side(move || async move {
                    run_sql(l, sql).await;
                }),
                side(move || async move {
                    run_sql(r, sql).await;
                }),
            ],
        )
        .await;
        println!(
            "| {name} | {} | {} | {} | 0 |",
            wall(&stats[0]),
            wall(&stats[1]),
            ratio(&stats[1], &stats[0])
        );
    }

    // INSERT of every row into a new table, each run its own table (made
    // outside the timing; the previous run's table is removed first).
    let runs = AtomicUsize::new(0);
    let targets = args.dir.join("cluster-insert");
    let _ = std::fs::remove_dir_all(&targets);
    std::fs::create_dir_all(&targets).expect("insert directory");
    let created: std::sync::Mutex<[u64; 2]> = Default::default();
    let insert_side = |ctx: SessionContext, i: usize| {
        let (runs, targets, created) = (&runs, &targets, &created);
        side_with_setup(
            move || {
                let ctx = ctx.clone();
                async move {
                    let n = runs.fetch_add(1, Ordering::Relaxed);
                    if n >= 2 {
                        let _ = std::fs::remove_dir_all(targets.join(format!("t{}.lance", n - 2)));
                    }
                    let table = targets.join(format!("t{n}.lance"));
                    let uri = table.to_string_lossy().to_string();
                    ctx.sql(&format!(
                        "CREATE EXTERNAL TABLE t{n} (l_quantity DOUBLE NOT NULL, \
                         l_extendedprice DOUBLE NOT NULL, l_discount DOUBLE NOT NULL, \
                         l_tax DOUBLE NOT NULL, l_returnflag VARCHAR NOT NULL, \
                         l_linestatus VARCHAR NOT NULL, l_shipdate DATE NOT NULL) \
                         STORED AS LANCE LOCATION '{uri}'"
                    ))
                    .await
                    .expect("create the INSERT target");
                    (ctx, n, uri)
                }
            },
            move |(ctx, n, uri): (SessionContext, usize, String)| async move {
                let before = latest_version(&uri);
                run_sql(&ctx, &format!("INSERT INTO t{n} SELECT * FROM lineitem")).await;
                created.lock().expect("versions")[i] = latest_version(&uri) - before;
            },
        )
    };
    let stats = interleaved(
        args.iters,
        &mut [
            insert_side(local.clone(), 0),
            insert_side(remote.clone(), 1),
        ],
    )
    .await;
    let versions = *created.lock().expect("versions");
    println!(
        "| INSERT INTO ... SELECT * ({} rows) | {} | {} | {} | {} / {} |",
        args.rows,
        wall(&stats[0]),
        wall(&stats[1]),
        ratio(&stats[1], &stats[0]),
        versions[0],
        versions[1]
    );
    let _ = std::fs::remove_dir_all(&targets);
    drop(cluster);
    task_bytes_table(args).await;
}

/// The scan query of the plan-size table.
const TASK_QUERY: &str = "SELECT l_returnflag, sum(l_quantity) FROM t WHERE l_discount > 0.05 \
                          GROUP BY l_returnflag";

/// Bytes of the scan stage a Ballista task receives, for tables of 10,
/// 1,000 and 10,000 fragments, beside the manifest.
async fn task_bytes_table(args: &Args) {
    const PARTITIONS: usize = 4;
    println!(
        "\n## Bytes per cluster task against fragments ({PARTITIONS} partitions)\n\n`{TASK_QUERY}` \
         planned by the scheduler (`scheduler_session`) and cut into stages by Ballista's \
         planner: bytes of the encoded scan stage, which every scan task receives with its \
         partition number, and of the stage after it, next to the table's manifest (what a \
         design shipping the dataset would send). Encoding time: median of {} runs (min–max).\n",
        args.iters
    );
    println!("| fragments | manifest | scan stage (per task) | next stage | encode |");
    println!("|---|---|---|---|---|");
    let codec = physical_codec();
    for fragments in [10usize, 1_000, 10_000] {
        let path = args.dir.join(format!("plan-bytes-{fragments}.lance"));
        let uri = path.to_string_lossy().to_string();
        if !exists(&path) {
            write_lance(&uri, fragments * 10, 10, LanceFileVersion::V2_1).await;
        }
        let config = cluster_config(config(PARTITIONS));
        let ctx =
            SessionContext::new_with_state(scheduler_session(config).expect("scheduler session"));
        register(&ctx, "t", &uri).await;
        let plan = ctx
            .sql(TASK_QUERY)
            .await
            .expect("plan")
            .create_physical_plan()
            .await
            .expect("physical plan");
        let stages = DefaultDistributedPlanner::new()
            .plan_query_stages(
                &ballista_core::JobId::new("bench"),
                plan,
                ctx.state().config_options(),
            )
            .expect("stages");
        let encode = |stage: Arc<dyn ExecutionPlan>| {
            physical_plan_to_bytes_with_extension_codec(stage, codec.as_ref())
                .expect("encode a stage")
                .len()
        };
        let stage = |i: usize| Arc::clone(&stages[i]) as Arc<dyn ExecutionPlan>;
        let scan = encode(stage(0));
        let next = stages.get(1).map_or(0, |_| encode(stage(1)));
        let mut walls = Vec::new();
        for _ in 0..args.iters.max(1) {
            let started = Instant::now();
            encode(stage(0));
            walls.push(started.elapsed());
        }
        let time = Stats::from_runs(walls, Duration::ZERO);
        println!(
            "| {fragments} | {} B | {scan} B | {next} B | {:.3} ms ({:.3}–{:.3}) |",
            crate::plans::manifest_bytes(&path),
            time.median.as_secs_f64() * 1e3,
            time.min.as_secs_f64() * 1e3,
            time.max.as_secs_f64() * 1e3,
        );
    }
}
