//! The same SQL on a Ballista cluster: a `lance-cluster` scheduler and two
//! executors, separate processes on 127.0.0.1, so every plan is encoded by
//! the client, decoded by the scheduler, and every task encoded again and
//! decoded by an executor.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::LanceSessionContextExt;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::differential::{query, selective};
use crate::support::{Agreement, context, dataset_path, ok, private_cache, try_rows};

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

fn lance_cluster(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lance-cluster"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lance-cluster")
}

/// The first line a process prints (its address), within 30 s; the rest of
/// its output is drained (and dropped) until it exits.
fn first_line(process: &mut Child) -> String {
    let stdout = process.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = sender.send(lines.next().and_then(Result::ok).unwrap_or_default());
        lines.for_each(drop);
    });
    receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("no line printed within 30 s")
}

/// `command`'s output, or a panic (and the process killed) after 120 s.
fn output_within(command: &mut Command) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            text
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    for _ in 0..2400 {
        if let Some(status) = child.try_wait().unwrap() {
            return std::process::Output {
                status,
                stdout: stdout.join().unwrap(),
                stderr: stderr.join().unwrap(),
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{command:?} did not finish within 120 s");
}

/// `GET path` on the scheduler's REST API (one request, 2 s at most).
fn http_get(address: SocketAddr, path: &str) -> String {
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(2)) else {
        return String::new();
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

impl Cluster {
    /// A scheduler and `executors` executors on 127.0.0.1, each with two
    /// task slots; returns once every executor has registered.
    fn start(executors: usize) -> Self {
        let mut cluster = Cluster {
            scheduler: "127.0.0.1:1".parse().unwrap(),
            // Executors heartbeat every second and are lost after 5 s
            // without one.
            processes: vec![lance_cluster(&[
                "scheduler",
                "--bind",
                "127.0.0.1:0",
                "--executor-timeout-seconds",
                "5",
            ])],
        };
        let line = first_line(&mut cluster.processes[0]);
        cluster.scheduler = line
            .trim()
            .strip_prefix("lance-cluster scheduler listening on ")
            .unwrap_or_else(|| panic!("scheduler printed {line:?}"))
            .parse()
            .unwrap();
        let scheduler = cluster.scheduler.to_string();
        for _ in 0..executors {
            cluster.processes.push(lance_cluster(&[
                "executor",
                "--scheduler",
                &scheduler,
                "--bind",
                "127.0.0.1:0",
                "--slots",
                "2",
                "--heartbeat-seconds",
                "1",
            ]));
            let line = first_line(cluster.processes.last_mut().unwrap());
            assert!(
                line.starts_with("lance-cluster executor starting on 127.0.0.1:"),
                "executor printed {line:?}"
            );
        }
        // Wait for the registrations (bounded: 20 s).
        for _ in 0..200 {
            let listed = http_get(cluster.scheduler, "/api/executors");
            if listed.matches("\"id\":").count() >= executors {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{executors} executors did not register with {scheduler}");
    }

    /// A client context on this cluster.
    async fn client(&self) -> SessionContext {
        let state = datafusion_lance::lance_session_state(SessionConfig::new());
        datafusion_lance::cluster::ballista::connect(&format!("df://{}", self.scheduler), state)
            .await
            .unwrap()
    }
}

/// The latest version of the table at `uri`, read by Lance itself.
async fn version(uri: &str) -> u64 {
    lance::Dataset::open(uri).await.unwrap().version().version
}

/// A `numbers`-shaped table at `uri` with 2,000 rows in 20 fragments.
async fn numbers_table(uri: &str) {
    crate::fixtures::write(
        uri,
        vec![crate::fixtures::numbers_batch(0, 2000)],
        crate::fixtures::params(lance::dataset::WriteMode::Create, 100),
    )
    .await;
}

/// Generated queries — filters, projections, limits, aggregates, groups,
/// joins — give the same rows on the cluster as in one process, at several
/// partition counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_answers_generated_queries_like_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await;
    let cluster = Cluster::start(2);
    let local = context(2, &private_cache());
    let remote = cluster.client().await;
    let table = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    ok(&local, &table).await;
    ok(&remote, &table).await;
    // The oracle `m` for `selective`: the same rows in memory.
    let mem = datafusion::datasource::MemTable::try_new(
        crate::fixtures::numbers_schema(),
        vec![vec![crate::fixtures::numbers_batch(0, 2000)]],
    )
    .unwrap();
    local.register_table("m", Arc::new(mem)).unwrap();

    let mut rng = StdRng::seed_from_u64(0xc1_05_7e);
    let mut agreement = Agreement::default();
    for partitions in [1, 2, 4] {
        let set = format!("SET datafusion.execution.target_partitions = {partitions}");
        ok(&local, &set).await;
        ok(&remote, &set).await;
        for i in 0..40 {
            let sql = match i % 4 {
                0 | 1 => selective(&local, query(&mut rng, "t")).await,
                2 => format!(
                    "SELECT b, count(*), sum(id), min(s), max(v) FROM t WHERE id % {} <> 0 GROUP BY b",
                    2 + i
                ),
                _ => format!(
                    "SELECT a.id, b.s FROM t a JOIN t b ON a.id = b.id + {i} WHERE a.id < {}",
                    200 + 40 * i
                ),
            };
            agreement.record(
                try_rows(&remote, &sql).await,
                try_rows(&local, &sql).await,
                format!("target_partitions {partitions}, query {i}: {sql}"),
            );
        }
    }
    eprintln!("cluster differential: {agreement:?}");
    assert_eq!(agreement.queries, 120);
    agreement.assert_meaningful("cluster vs one process");
}

/// Writes on the cluster: INSERT, DELETE, UPDATE, `lance_merge` and MERGE
/// INTO each make exactly one new version with every row once; a merge whose
/// source repeats a key fails and makes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_on_a_cluster_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    // The source: DataFusion's own table functions (generate_series) have no
    // codec, so a cluster reads rows from tables.
    let source = dataset_path(&dir, "src.lance");
    crate::fixtures::write(
        &source,
        vec![crate::fixtures::numbers_batch(0, 10_000)],
        crate::fixtures::params(lance::dataset::WriteMode::Create, 500),
    )
    .await;
    let cluster = Cluster::start(2);
    let remote = cluster.client().await;
    ok(
        &remote,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    ok(
        &remote,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{source}'"),
    )
    .await;
    ok(&remote, "SET lance.max_rows_per_file = 500").await;
    ok(&remote, "SET datafusion.execution.target_partitions = 4").await;
    let v0 = version(&uri).await;

    // INSERT: 4 writer tasks, one commit. The client only hands the
    // statement to the scheduler.
    let insert = "INSERT INTO t SELECT id, id * 2, 'a' FROM src";
    let plan = remote
        .sql(insert)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    assert_eq!(plan.name(), "DistributedQueryExec");
    ok(&remote, insert).await;
    assert_eq!(version(&uri).await, v0 + 1);
    let ds = lance::Dataset::open(&uri).await.unwrap();
    assert_eq!(ds.count_rows(None).await.unwrap(), 10_000);
    // lance.max_rows_per_file reached the executors' writers.
    let fragments = ds.get_fragments();
    assert_eq!(fragments.len(), 20);
    assert!(
        fragments
            .iter()
            .all(|f| f.metadata().physical_rows == Some(500))
    );
    let stats = |ctx: &SessionContext| {
        let ctx = ctx.clone();
        async move {
            try_rows(&ctx, "SELECT count(*), count(DISTINCT id), sum(v) FROM t")
                .await
                .unwrap()
        }
    };
    assert_eq!(stats(&remote).await, ["10000|10000|99990000"]);

    // DELETE and UPDATE.
    ok(&remote, "DELETE FROM t WHERE id >= 9000").await;
    assert_eq!(version(&uri).await, v0 + 2);
    ok(&remote, "UPDATE t SET tag = 'u' WHERE id < 100").await;
    assert_eq!(version(&uri).await, v0 + 3);
    assert_eq!(
        try_rows(&remote, "SELECT tag, count(*) FROM t GROUP BY tag")
            .await
            .unwrap(),
        ["a|8900", "u|100"]
    );

    // lance_merge: 500 matched, 500 new.
    ok(
        &remote,
        "SELECT * FROM lance_merge('t', (SELECT id, 0 AS v, 'm' AS tag FROM src \
         WHERE id BETWEEN 8500 AND 9499), 'id')",
    )
    .await;
    assert_eq!(version(&uri).await, v0 + 4);
    assert_eq!(
        try_rows(&remote, "SELECT count(*), count(DISTINCT id) FROM t")
            .await
            .unwrap(),
        ["9500|9500"]
    );

    // A source with a repeated key: an error naming it, and no version.
    let error = try_rows(
        &remote,
        "SELECT * FROM lance_merge('t', (SELECT id % 10 AS id, 1 AS v, 'x' AS tag FROM src \
         WHERE id < 20), 'id')",
    )
    .await
    .unwrap_err();
    assert!(
        error.contains("occurs more than once in the source"),
        "{error}"
    );
    assert_eq!(version(&uri).await, v0 + 4);

    // MERGE INTO.
    remote
        .lance_sql(
            "MERGE INTO t USING (SELECT id FROM src WHERE id < 10) s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET tag = 'mi'",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(version(&uri).await, v0 + 5);
    assert_eq!(
        try_rows(&remote, "SELECT count(*) FROM t WHERE tag = 'mi'")
            .await
            .unwrap(),
        ["10"]
    );
    crate::support::validates(&uri).await;

    // INSERT OVERWRITE, TRUNCATE and COPY ... STORED AS LANCE.
    ok(
        &remote,
        "INSERT OVERWRITE t SELECT id, 1, 'o' FROM src WHERE id < 3000",
    )
    .await;
    assert_eq!(version(&uri).await, v0 + 6);
    assert_eq!(
        try_rows(&remote, "SELECT count(*), min(tag), max(tag) FROM t")
            .await
            .unwrap(),
        ["3000|o|o"]
    );
    assert_eq!(
        try_rows(&remote, "TRUNCATE TABLE t").await.unwrap(),
        ["3000"]
    );
    assert_eq!(version(&uri).await, v0 + 7);
    assert_eq!(
        try_rows(&remote, "SELECT count(*) FROM t").await.unwrap(),
        ["0"]
    );
    let copy = dataset_path(&dir, "copy.lance");
    ok(
        &remote,
        &format!("COPY (SELECT id, s FROM src WHERE id % 2 = 0) TO '{copy}' STORED AS LANCE"),
    )
    .await;
    let copied = lance::Dataset::open(&copy).await.unwrap();
    assert_eq!(copied.version().version, 1);
    assert_eq!(copied.count_rows(None).await.unwrap(), 5000);
    crate::support::validates(&copy).await;
}

/// `lance-sql --cluster df://HOST:PORT` runs its statements on the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lance_sql_runs_statements_on_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await;
    let cluster = Cluster::start(2);
    let url = format!("df://{}", cluster.scheduler);
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_lance-sql"))
            .current_dir(dir.path())
            .args([
                "--cluster",
                &url,
                "-q",
                "--format",
                "csv",
                "-c",
                &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
                "-c",
                "SELECT count(*) AS n, sum(id) AS total FROM t WHERE id % 2 = 0",
            ]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "n,total\n1000,999000\n");

    let bad = output_within(Command::new(env!("CARGO_BIN_EXE_lance-sql")).args([
        "--cluster",
        "http://127.0.0.1:1",
        "-c",
        "SELECT 1",
    ]));
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("expected df://HOST:PORT"), "{stderr}");
}

/// The SQL surface beyond reads and writes runs on a cluster as in one
/// process: time travel (clauses and `lance_as_of`, planned by the client's
/// interception, their pinned tables encoded for the scheduler), the metadata
/// and tag functions, the distance functions (executors' registries), and a
/// permutation plan built and read on the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sql_surface_runs_on_a_cluster_like_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await; // version 1: ids 0..2000
    let cluster = Cluster::start(2);
    let remote = cluster.client().await;
    let local = context(2, &private_cache());
    let register = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    ok(&remote, &register).await;
    ok(&local, &register).await;
    ok(
        &remote,
        "INSERT INTO t SELECT id + 10000, v, s, b, d FROM t WHERE id < 100",
    )
    .await; // version 2
    let rows = |ctx: &SessionContext, statement: &'static str| {
        let ctx = ctx.clone();
        async move {
            let batches = crate::support::sql(&ctx, statement)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
            crate::support::sorted_rows(&batches)
        }
    };
    // A tag made on the cluster (by an executor) is seen everywhere.
    assert_eq!(
        rows(
            &remote,
            "SELECT * FROM lance_tag('t', 'create', 'before', 1)"
        )
        .await,
        vec!["before|1"]
    );
    for (statement, expected) in [
        (
            "SELECT count(*), sum(id) FROM t VERSION AS OF 1",
            "2000|1999000",
        ),
        ("SELECT count(*) FROM t VERSION AS OF 'before'", "2000"),
        ("SELECT count(*) FROM lance_as_of('t', 2)", "2100"),
        (
            "SELECT count(*), min(id) FROM (SELECT id FROM t EXCEPT SELECT id FROM t VERSION AS OF 1)",
            "100|10000",
        ),
        (
            "SELECT sum(rows), sum(physical_rows) FROM lance_fragments('t')",
            "2100|2100",
        ),
        ("SELECT tag, version FROM lance_tags('t')", "before|1"),
        (
            "SELECT count(*) FROM t WHERE l2_distance([id, 0.0], [0.0, 0.0]) < 100.0",
            "10",
        ),
    ] {
        let got = rows(&remote, statement).await;
        assert_eq!(got, rows(&local, statement).await, "{statement}");
        assert_eq!(got, vec![expected], "{statement}");
    }
    // A permutation plan built on the cluster (split, write and commit on
    // executors), then read there by 4 tasks: each row of the split once.
    let plan = dataset_path(&dir, "plan.lance");
    let build = format!(
        "SELECT split_name, rows, plan_version FROM lance_build_permutation('t', '{plan}', \
         'split=random', 'counts=1500,600', 'seed=3', 'names=train,test')"
    );
    let built = crate::support::sql(&remote, &build).await.unwrap();
    assert_eq!(
        crate::support::sorted_rows(&built),
        vec!["test|600|1", "train|1500|1"]
    );
    let ids = |ctx: &SessionContext, partitions: usize| {
        let statement = format!(
            "SELECT id FROM lance_permutation('{plan}', 'train', 'partitions={partitions}')"
        );
        let ctx = ctx.clone();
        async move {
            let batches = crate::support::sql(&ctx, &statement).await.unwrap();
            crate::permutation::ids(&batches)
        }
    };
    let in_order = ids(&local, 1).await;
    assert_eq!(in_order.len(), 1500);
    assert_eq!(ids(&remote, 1).await, in_order, "one task keeps plan order");
    let mut spread = ids(&remote, 4).await;
    let mut expected = in_order.clone();
    spread.sort();
    expected.sort();
    expected.dedup();
    assert_eq!(spread, expected, "4 tasks read each row of the split once");
}

/// datafusion-distributed workers serving on 127.0.0.1 (gRPC servers in this
/// process), stopped when dropped.
struct DistributedWorkers {
    urls: Vec<String>,
    servers: Vec<tokio::task::JoinHandle<datafusion::error::Result<()>>>,
}

impl Drop for DistributedWorkers {
    fn drop(&mut self) {
        for server in &self.servers {
            server.abort();
        }
    }
}

async fn distributed_workers(n: usize) -> DistributedWorkers {
    let mut workers = DistributedWorkers {
        urls: Vec::new(),
        servers: Vec::new(),
    };
    for _ in 0..n {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        workers
            .urls
            .push(format!("http://{}", listener.local_addr().unwrap()));
        workers.servers.push(tokio::spawn(
            datafusion_lance::cluster::distributed::serve_worker(listener),
        ));
    }
    workers
}

/// Under datafusion-distributed with two workers, a Lance scan is split by
/// fragment groups across tasks (each task's plan encoded and sent over
/// gRPC), generated queries give the rows one process gives, and an INSERT
/// makes one version with every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn datafusion_distributed_reads_and_inserts_like_one_process() {
    use datafusion_lance::cluster::distributed::{Workers, coordinator_state};
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await;
    let workers = distributed_workers(2).await;
    let remote = SessionContext::new_with_state(coordinator_state(
        SessionConfig::new().with_target_partitions(4),
        Workers::new(&workers.urls).unwrap(),
    ));
    let local = context(4, &private_cache());
    let table = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    ok(&local, &table).await;
    ok(&remote, &table).await;
    let mem = datafusion::datasource::MemTable::try_new(
        crate::fixtures::numbers_schema(),
        vec![vec![crate::fixtures::numbers_batch(0, 2000)]],
    )
    .unwrap();
    local.register_table("m", Arc::new(mem)).unwrap();

    // The scan runs as two tasks, each reading its own fragment groups.
    let plan = remote
        .sql("SELECT b, count(*) FROM t GROUP BY b")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let shown = datafusion_distributed::display_plan_ascii(plan.as_ref(), false);
    assert!(shown.contains("DistributedExec"), "{shown}");
    assert!(shown.contains("tasks=2"), "{shown}");
    assert!(shown.contains("LanceScanExec"), "{shown}");

    let mut rng = StdRng::seed_from_u64(0xd1_57);
    let mut agreement = Agreement::default();
    for i in 0..60 {
        let sql = match i % 3 {
            0 | 1 => selective(&local, query(&mut rng, "t")).await,
            _ => format!(
                "SELECT b, count(*), sum(id), min(s) FROM t WHERE id % {} <> 0 GROUP BY b",
                2 + i
            ),
        };
        agreement.record(
            try_rows(&remote, &sql).await,
            try_rows(&local, &sql).await,
            format!("query {i}: {sql}"),
        );
    }
    eprintln!("datafusion-distributed differential: {agreement:?}");
    assert_eq!(agreement.queries, 60);
    agreement.assert_meaningful("datafusion-distributed vs one process");

    // INSERT through the workers: one version, every row once.
    let target = dataset_path(&dir, "copy.lance");
    ok(
        &remote,
        &format!(
            "CREATE EXTERNAL TABLE c (id BIGINT NOT NULL, s VARCHAR) \
             STORED AS LANCE LOCATION '{target}'"
        ),
    )
    .await;
    let v0 = version(&target).await;
    ok(&remote, "SET lance.max_rows_per_file = 300").await;
    let insert = remote
        .sql("INSERT INTO c SELECT id, s FROM t")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    // Two writer tasks, each over its own share of the fragments; the
    // commit reads their rows.
    let shown = datafusion_distributed::display_plan_ascii(insert.as_ref(), false);
    let (head, stage) = shown.split_once("Stage 1 ── tasks=2").expect(&shown);
    assert!(head.contains("LanceCommitExec"), "{shown}");
    assert!(stage.contains("LanceWriteExec"), "{shown}");
    assert!(stage.contains("t1: LanceScanExec"), "{shown}");
    ok(&remote, "INSERT INTO c SELECT id, s FROM t").await;
    assert_eq!(version(&target).await, v0 + 1);
    ok(
        &local,
        &format!("CREATE EXTERNAL TABLE c STORED AS LANCE LOCATION '{target}'"),
    )
    .await;
    assert_eq!(
        try_rows(
            &local,
            "SELECT count(*), count(DISTINCT id), sum(id) FROM c"
        )
        .await
        .unwrap(),
        ["2000|2000|1999000"]
    );
    let fragments = lance::Dataset::open(&target).await.unwrap().get_fragments();
    assert!(
        fragments
            .iter()
            .all(|f| f.metadata().physical_rows.unwrap() <= 300),
        "lance.max_rows_per_file reached the writers"
    );
}

/// The scheduler cuts an INSERT into a stage of writer tasks (one per input
/// partition, run on any executor) and a stage with the one commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_runs_writers_apart_from_their_commit() {
    use ballista_scheduler::planner::{DefaultDistributedPlanner, DistributedPlanner};
    use datafusion::physical_plan::displayable;
    let dir = tempfile::tempdir().unwrap();
    let source = dataset_path(&dir, "src.lance");
    numbers_table(&source).await;
    let config = datafusion_lance::cluster::ballista::cluster_config(
        SessionConfig::new().with_target_partitions(4),
    );
    let state = datafusion_lance::cluster::ballista::scheduler_session(config).unwrap();
    let ctx = SessionContext::new_with_state(state);
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{source}'"),
    )
    .await;
    let target = dataset_path(&dir, "t.lance");
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT, s VARCHAR) STORED AS LANCE LOCATION '{target}'"
        ),
    )
    .await;
    let plan = ctx
        .sql("INSERT INTO t SELECT id, s FROM src")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let stages = DefaultDistributedPlanner::new()
        .plan_query_stages(
            &ballista_core::JobId::new("insert"),
            plan,
            ctx.state().config_options(),
        )
        .unwrap();
    let shown: Vec<String> = stages
        .iter()
        .map(|s| displayable(s.as_ref()).indent(false).to_string())
        .collect();
    assert_eq!(stages.len(), 2, "{shown:#?}");
    assert!(shown[0].contains("LanceWriteExec"), "{shown:#?}");
    assert!(!shown[0].contains("LanceCommitExec"), "{shown:#?}");
    assert_eq!(stages[0].input_partition_count(), 4, "{shown:#?}");
    assert!(shown[1].contains("LanceCommitExec"), "{shown:#?}");
    assert!(!shown[1].contains("LanceWriteExec"), "{shown:#?}");
}

/// An `INSERT INTO t SELECT id, s FROM src` (2,000 rows, files of 100 rows)
/// planned as a scheduler plans it, for a table `t` at `dir/name`: the
/// scheduler's context, the commit plan and its writer stage.
async fn spread_insert(
    dir: &tempfile::TempDir,
    name: &str,
) -> (
    SessionContext,
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    let source = dataset_path(dir, "src.lance");
    numbers_table(&source).await;
    let uri = dataset_path(dir, name);
    let config = datafusion_lance::cluster::ballista::cluster_config(
        SessionConfig::new().with_target_partitions(4),
    );
    let ctx = SessionContext::new_with_state(
        datafusion_lance::cluster::ballista::scheduler_session(config).unwrap(),
    );
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{source}'"),
    )
    .await;
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT, s VARCHAR) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(&ctx, "SET lance.max_rows_per_file = 100").await;
    let plan = ctx
        .sql("INSERT INTO t SELECT id, s FROM src")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let coalesce = Arc::clone(plan.children()[0]);
    let writers = Arc::clone(coalesce.children()[0]);
    assert_eq!(writers.name(), "LanceWriteExec");
    (ctx, plan, writers)
}

/// Every task of `writers` run once, as executors would; their output rows.
async fn run_writer_tasks(
    ctx: &SessionContext,
    writers: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> Vec<arrow::array::RecordBatch> {
    use datafusion::physical_plan::ExecutionPlanProperties;
    let mut rows = Vec::new();
    for partition in 0..writers.output_partitioning().partition_count() {
        let stream = writers.execute(partition, ctx.task_ctx()).unwrap();
        rows.extend(
            futures::TryStreamExt::try_collect::<Vec<_>>(stream)
                .await
                .unwrap(),
        );
    }
    rows
}

/// `plan`'s commit task fed `rows` (the writer stage's output).
async fn run_commit_task(
    ctx: &SessionContext,
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    writers: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    rows: Vec<arrow::array::RecordBatch>,
) -> Vec<String> {
    let input = datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
        &[rows],
        writers.schema(),
        None,
    )
    .unwrap();
    let commit = Arc::clone(plan).with_new_children(vec![input]).unwrap();
    let committed = datafusion::physical_plan::collect(commit, ctx.task_ctx())
        .await
        .unwrap();
    crate::support::sorted_rows(&committed)
}

/// Files under `dir` (0 when it does not exist).
fn files_in(dir: &std::path::Path) -> usize {
    if dir.exists() {
        crate::support::all_files(dir).len()
    } else {
        0
    }
}

/// The data files the latest version of the table at `uri` references.
async fn referenced_files(uri: &str) -> usize {
    let dataset = lance::Dataset::open(uri).await.unwrap();
    dataset
        .get_fragments()
        .iter()
        .map(|f| f.metadata().files.len())
        .sum()
}

/// On a cluster an INSERT's writers mark themselves in flight in the table's
/// directory until the commit: `lance_vacuum` run by another process between
/// the writers and the commit (the way a vacuum on another executor would,
/// with `orphans_older_than=0s`) keeps their files, the commit lands with
/// every row, and the marks are gone afterwards. (The table path holds `~`
/// and a space: the marks are found where the writers put them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vacuum_elsewhere_keeps_the_files_of_writers_running_on_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, plan, writers) = spread_insert(&dir, "t~1 a.lance").await;
    let uri = dataset_path(&dir, "t~1 a.lance");
    let v0 = version(&uri).await;
    let rows = run_writer_tasks(&ctx, &writers).await;
    let marks = dir.path().join("t~1 a.lance/_datafusion_lance/writes");
    assert_eq!(files_in(&marks), 4, "one mark per writer task");
    // Another process vacuums every unreferenced file it may.
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_lance-sql"))
            .current_dir(dir.path())
            .args([
                "-q",
                "--format",
                "csv",
                "-c",
                &format!(
                    "SELECT orphans_removed FROM lance_vacuum('{uri}', 'older_than=0s', \
                 'orphans_older_than=0s')"
                ),
            ]),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "orphans_removed\n0\n");
    // The commit stage, fed the writers' rows.
    assert_eq!(
        run_commit_task(&ctx, &plan, &writers, rows.clone()).await,
        ["2000"]
    );
    assert_eq!(version(&uri).await, v0 + 1);
    assert_eq!(
        try_rows(&ctx, "SELECT count(*), count(DISTINCT id) FROM t")
            .await
            .unwrap(),
        ["2000|2000"]
    );
    crate::support::validates(&uri).await;
    assert_eq!(files_in(&marks), 0, "marks left behind");

    // The commit task run again (as Ballista re-runs a stage whose executor
    // was lost before it reported) finds its version and commits nothing.
    assert_eq!(run_commit_task(&ctx, &plan, &writers, rows).await, ["2000"]);
    assert_eq!(version(&uri).await, v0 + 1);
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM t").await.unwrap(),
        ["2000"]
    );
    crate::support::validates(&uri).await;
}

/// Writer tasks run twice — the first attempts' output lost, as when
/// Ballista runs the tasks of a lost executor again, or when a commit task
/// runs again with the output of writers that ran again: the commit commits
/// one attempt's fragments and removes the files the other attempts recorded
/// in their marks, so the data directory holds exactly the committed files.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_commit_removes_the_files_of_lost_writer_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, plan, writers) = spread_insert(&dir, "t.lance").await;
    let uri = dataset_path(&dir, "t.lance");
    let data = dir.path().join("t.lance/data");
    let before = files_in(&data);
    let _lost = run_writer_tasks(&ctx, &writers).await;
    let written = files_in(&data) - before;
    assert!(written >= 20, "{written} files of 100 rows");
    let rows = run_writer_tasks(&ctx, &writers).await;
    assert_eq!(files_in(&data) - before, 2 * written);
    assert_eq!(run_commit_task(&ctx, &plan, &writers, rows).await, ["2000"]);
    assert_eq!(
        try_rows(&ctx, "SELECT count(*), count(DISTINCT id) FROM t")
            .await
            .unwrap(),
        ["2000|2000"]
    );
    assert_eq!(files_in(&data), referenced_files(&uri).await);
    assert_eq!(
        files_in(&dir.path().join("t.lance/_datafusion_lance/writes")),
        0
    );

    // The commit task run again with the output of writers run again: it
    // finds its statement's version, commits nothing, and removes the new
    // attempts' files.
    let v1 = version(&uri).await;
    let rows = run_writer_tasks(&ctx, &writers).await;
    assert_eq!(files_in(&data), referenced_files(&uri).await + written);
    assert_eq!(run_commit_task(&ctx, &plan, &writers, rows).await, ["2000"]);
    assert_eq!(version(&uri).await, v1);
    assert_eq!(files_in(&data), referenced_files(&uri).await);
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM t").await.unwrap(),
        ["2000"]
    );
    crate::support::validates(&uri).await;
}

/// DELETE, UPDATE and merges write and commit in one task. On a cluster
/// that task run again after it committed (Ballista running again the task
/// of an executor lost before it reported) finds its statement's version and
/// answers what it recorded, changing nothing more: `SET v = v + 1` adds one
/// once, a merge inserts its rows once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_task_run_again_after_its_commit_changes_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let source = dataset_path(&dir, "src.lance");
    numbers_table(&source).await;
    let uri = dataset_path(&dir, "t.lance");
    let config = datafusion_lance::cluster::ballista::cluster_config(
        SessionConfig::new().with_target_partitions(4),
    );
    let ctx = SessionContext::new_with_state(
        datafusion_lance::cluster::ballista::scheduler_session(config).unwrap(),
    );
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{source}'"),
    )
    .await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT id, id AS v, 'a' AS tag FROM src",
    )
    .await;
    let statements = [
        ("UPDATE t SET v = v + 1 WHERE id < 100", "2000|2000|1999100"),
        ("DELETE FROM t WHERE id >= 1900", "1900|1900|1804150"),
        (
            "SELECT * FROM lance_merge('t', (SELECT id, 0 AS v, 'm' AS tag FROM src \
             WHERE id BETWEEN 1850 AND 1949), 'id')",
            "1950|1950|1710425",
        ),
        (
            "MERGE INTO t USING (SELECT id, 7 AS v FROM src WHERE id < 10) s \
             ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
            "1950|1950|1710440",
        ),
    ];
    for (sql, expected) in statements {
        let plan = ctx
            .lance_sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let before = version(&uri).await;
        let first = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
            .await
            .unwrap();
        assert_eq!(version(&uri).await, before + 1, "{sql}");
        let again = datafusion::physical_plan::collect(plan, ctx.task_ctx())
            .await
            .unwrap_or_else(|e| panic!("{sql} run again: {e}"));
        assert_eq!(
            crate::support::sorted_rows(&again),
            crate::support::sorted_rows(&first),
            "{sql}"
        );
        assert_eq!(version(&uri).await, before + 1, "{sql} run again");
        assert_eq!(
            try_rows(&ctx, "SELECT count(*), count(DISTINCT id), sum(v) FROM t")
                .await
                .unwrap(),
            [expected],
            "{sql}"
        );
        assert_eq!(
            files_in(&dir.path().join("t.lance/_datafusion_lance/writes")),
            0,
            "{sql}: marks left behind"
        );
    }
    crate::support::validates(&uri).await;
}

/// The scan tasks of a query open the table through their executor's
/// process-level Lance session: each executor loads the manifest once,
/// however many of the query's 4 tasks it runs (at least one runs two), and
/// not again for the next query of the same version. Read from
/// `lance_session_stats()`, evaluated by the executors beside the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_executor_loads_a_manifest_once() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await;
    let cluster = Cluster::start(2);
    let executors: Vec<String> = cluster.processes[1..]
        .iter()
        .map(|p| p.id().to_string())
        .collect();
    let remote = cluster.client().await;
    ok(
        &remote,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(&remote, "SET datafusion.execution.target_partitions = 4").await;
    let sql = "SELECT s['process_id'], min(s['loads']), max(s['loads']), count(*) \
               FROM (SELECT lance_session_stats() AS s FROM t WHERE id % 3 <> 1) \
               GROUP BY 1";
    for query in 0..2 {
        let rows = try_rows(&remote, sql).await.unwrap();
        assert!(!rows.is_empty(), "query {query}");
        let mut scanned = 0;
        for row in &rows {
            let fields: Vec<&str> = row.split('|').collect();
            assert!(executors.iter().any(|e| e == fields[0]), "{rows:?}");
            assert_eq!(fields[1..3], ["1", "1"], "query {query}: {rows:?}");
            scanned += fields[3].parse::<usize>().unwrap();
        }
        assert_eq!(scanned, 1333, "query {query}: {rows:?}");
    }
    let plan = try_rows(&remote, &format!("EXPLAIN {sql}")).await.unwrap();
    assert!(plan.iter().any(|l| l.contains("partitions=4")), "{plan:#?}");
}

/// One trial of an executor kill: a fresh 2-executor cluster, a client with
/// `src` (the 40,000-row source at `source`) and an empty table `t`
/// registered, `lance.max_rows_per_file` set and 4 target partitions.
struct KillTrial {
    cluster: Cluster,
    remote: SessionContext,
    uri: String,
    data: std::path::PathBuf,
    trial: usize,
}

impl KillTrial {
    async fn start(dir: &tempfile::TempDir, source: &str, trial: usize, per_file: usize) -> Self {
        let cluster = Cluster::start(2);
        let remote = cluster.client().await;
        let name = format!("t{trial}.lance");
        let uri = dataset_path(dir, &name);
        ok(
            &remote,
            &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{source}'"),
        )
        .await;
        ok(
            &remote,
            &format!(
                "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, s VARCHAR) \
                 STORED AS LANCE LOCATION '{uri}'"
            ),
        )
        .await;
        ok(
            &remote,
            &format!("SET lance.max_rows_per_file = {per_file}"),
        )
        .await;
        ok(&remote, "SET datafusion.execution.target_partitions = 4").await;
        Self {
            cluster,
            remote,
            data: dir.path().join(&name).join("data"),
            uri,
            trial,
        }
    }

    /// Runs `statement` on the cluster, kills executor `which` once the
    /// data directory holds more than `files` files, and returns the
    /// statement's outcome (120 s at most) with the version before and after.
    async fn run_and_kill(
        &mut self,
        statement: &'static str,
        which: usize,
        files: usize,
    ) -> (Result<Vec<String>, String>, u64, u64) {
        let v0 = version(&self.uri).await;
        let running = {
            let remote = self.remote.clone();
            tokio::spawn(async move { try_rows(&remote, statement).await })
        };
        kill_once_written(&mut self.cluster, which, &self.data, files).await;
        let trial = self.trial;
        let outcome = tokio::time::timeout(Duration::from_secs(120), running)
            .await
            .unwrap_or_else(|_| panic!("trial {trial}: {statement} did not end within 120 s"))
            .unwrap();
        (outcome, v0, version(&self.uri).await)
    }

    /// The verdict on an outcome: committed once with `answer` (true), or
    /// failed leaving the version unchanged or one more (false).
    fn verdict(
        &self,
        outcome: &Result<Vec<String>, String>,
        v0: u64,
        v: u64,
        answer: &str,
    ) -> bool {
        let trial = self.trial;
        match outcome {
            Ok(rows) => {
                assert_eq!(rows, &[answer], "trial {trial}");
                assert_eq!(v, v0 + 1, "trial {trial}");
                true
            }
            Err(e) => {
                assert!(
                    v == v0 || v == v0 + 1,
                    "trial {trial}: version {v}, error {e}"
                );
                false
            }
        }
    }

    /// The next statement succeeds on the executor left, one version more,
    /// and Lance validates the table.
    async fn next_statement_succeeds(&self, v: u64) {
        ok(
            &self.remote,
            "INSERT INTO t SELECT id + 1000000, s FROM src WHERE id < 1000",
        )
        .await;
        assert_eq!(version(&self.uri).await, v + 1, "trial {}", self.trial);
        crate::support::validates(&self.uri).await;
    }
}

/// The 40,000-row source of the executor-kill trials, at `dir/src.lance`.
async fn kill_source(dir: &tempfile::TempDir) -> String {
    let source = dataset_path(dir, "src.lance");
    crate::fixtures::write(
        &source,
        vec![crate::fixtures::numbers_batch(0, 40_000)],
        crate::fixtures::params(lance::dataset::WriteMode::Create, 1_000),
    )
    .await;
    source
}

/// An executor killed (SIGKILL) while an INSERT's writers run: the statement
/// fails, or Ballista runs the lost tasks again on the other executor; either
/// way the table ends at the version it had, or one more with every row
/// exactly once, and the next INSERT succeeds. One trial in `make test`, 10
/// in `make test-nightly`. (With Ballista's push scheduling the lost tasks
/// were reset but never offered again and the statement hung; the Lance
/// cluster uses pull scheduling.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_killed_mid_insert_loses_and_repeats_no_row() {
    let trials = if crate::support::nightly() { 10 } else { 1 };
    let dir = tempfile::tempdir().unwrap();
    let source = kill_source(&dir).await;
    let mut verdicts = (0, 0);
    for trial in 0..trials {
        let mut t = KillTrial::start(&dir, &source, trial, 50).await;
        // Once the writers have stored a file, kill an executor.
        let (outcome, v0, v) = t
            .run_and_kill("INSERT INTO t SELECT id, s FROM src", 1, 0)
            .await;
        if t.verdict(&outcome, v0, v, "40000") {
            verdicts.0 += 1;
        } else {
            verdicts.1 += 1;
        }
        let expected = if v == v0 + 1 { 40_000 } else { 0 };
        assert_eq!(
            try_rows(&t.remote, "SELECT count(*), count(DISTINCT id) FROM t")
                .await
                .unwrap(),
            [format!("{expected}|{expected}")],
            "trial {trial}"
        );
        t.next_statement_succeeds(v).await;
    }
    eprintln!(
        "executor kills: {} retried to success, {} failed cleanly",
        verdicts.0, verdicts.1
    );
}

/// Waits (60 s at most) until the directory `data` holds more than `files`
/// files, then kills (SIGKILL) the cluster's process `which` (1 or 2: an
/// executor).
async fn kill_once_written(
    cluster: &mut Cluster,
    which: usize,
    data: &std::path::Path,
    files: usize,
) {
    let mut started = false;
    for _ in 0..6_000 {
        if files_in(data) > files {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        started,
        "the statement never wrote a file to {}",
        data.display()
    );
    let executor = &mut cluster.processes[which];
    executor.kill().unwrap();
    executor.wait().unwrap();
}

/// An executor killed (SIGKILL) once a merge has written a file: the merge
/// task runs on one executor, so the trials alternate which executor is
/// killed. Either way the merge fails, or commits exactly once (run again
/// elsewhere, or found committed by its run again), every key once, and the
/// next statement succeeds. One trial in `make test`, 10 in `make
/// test-nightly`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_killed_mid_merge_loses_and_repeats_no_row() {
    let trials = if crate::support::nightly() { 10 } else { 1 };
    let dir = tempfile::tempdir().unwrap();
    let source = kill_source(&dir).await;
    let mut verdicts = (0, 0);
    for trial in 0..trials {
        let mut t = KillTrial::start(&dir, &source, trial, 1000).await;
        ok(
            &t.remote,
            "INSERT INTO t SELECT id, s FROM src WHERE id < 20000",
        )
        .await;
        let files = files_in(&t.data);
        // 10,000 keys matched, 10,000 new.
        let (outcome, v0, v) = t
            .run_and_kill(
                "SELECT inserted, updated, deleted FROM lance_merge('t', \
                 (SELECT id, 'm' AS s FROM src WHERE id >= 10000 AND id < 30000), 'id')",
                1 + trial % 2,
                files,
            )
            .await;
        if t.verdict(&outcome, v0, v, "10000|10000|0") {
            verdicts.0 += 1;
        } else {
            verdicts.1 += 1;
        }
        let expected = if v == v0 + 1 {
            "30000|30000|20000"
        } else {
            "20000|20000|0"
        };
        assert_eq!(
            try_rows(
                &t.remote,
                "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE s = 'm') FROM t"
            )
            .await
            .unwrap(),
            [expected],
            "trial {trial}"
        );
        t.next_statement_succeeds(v).await;
    }
    eprintln!(
        "executor kills during merges: {} committed once, {} failed cleanly",
        verdicts.0, verdicts.1
    );
}

/// The scheduler is SIGKILLed after an INSERT committed and another is
/// started on the same address: the executors register with it again, the
/// committed rows are all there at the committed version, and the next
/// INSERT commits once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scheduler_restart_loses_no_committed_data() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers_table(&uri).await;
    let mut cluster = Cluster::start(2);
    let register = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    let insert = "INSERT INTO t SELECT id + 10000, v, s, b, d FROM t WHERE id < 100";
    let count = "SELECT count(*), count(DISTINCT id), sum(id) FROM t";
    let client = cluster.client().await;
    ok(&client, &register).await;
    ok(&client, insert).await;
    let committed = version(&uri).await;
    let rows = try_rows(&client, count).await.unwrap();
    assert_eq!(
        rows,
        vec![format!(
            "2100|2100|{}",
            (0..2000).sum::<i64>() + (10_000..10_100).sum::<i64>()
        )]
    );
    drop(client);

    let scheduler = cluster.scheduler.to_string();
    let old = &mut cluster.processes[0];
    old.kill().unwrap();
    old.wait().unwrap();
    let mut restarted = lance_cluster(&[
        "scheduler",
        "--bind",
        &scheduler,
        "--executor-timeout-seconds",
        "5",
    ]);
    let line = first_line(&mut restarted);
    assert_eq!(
        line.trim(),
        format!("lance-cluster scheduler listening on {scheduler}")
    );
    cluster.processes[0] = restarted;
    // The executors' heartbeats register them again (bounded: 20 s).
    let mut listed = 0;
    for _ in 0..200 {
        listed = http_get(cluster.scheduler, "/api/executors")
            .matches("\"id\":")
            .count();
        if listed >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(listed, 2, "the executors registered with the new scheduler");

    let client = cluster.client().await;
    ok(&client, &register).await;
    assert_eq!(version(&uri).await, committed);
    assert_eq!(try_rows(&client, count).await.unwrap(), rows);
    ok(
        &client,
        "INSERT INTO t SELECT id + 20000, v, s, b, d FROM t WHERE id < 100",
    )
    .await;
    assert_eq!(version(&uri).await, committed + 1);
    assert_eq!(
        try_rows(&client, "SELECT count(*) FROM t WHERE id >= 20000")
            .await
            .unwrap(),
        vec!["100".to_string()]
    );
}
