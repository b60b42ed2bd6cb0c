//! Real S3: each test starts moto's S3 server on 127.0.0.1
//! (`s3/moto_s3.py`, bucket `lance`) and reads, writes, merges, commits
//! concurrently and keeps a catalog there through the AWS backend.
//! Credentials come from `lance.storage.*` options or, for `lance-sql`,
//! from the standard AWS environment variables; neither shows in plans or
//! errors.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use datafusion_lance::register_lance_catalog;
use lance::dataset::builder::DatasetBuilder;
use lance_io::object_store::{
    ObjectStore, ObjectStoreParams, ObjectStoreRegistry, StorageOptionsAccessor,
};
use tokio::sync::Barrier;

use crate::support::{context, ints, ints_of, ok, private_cache, sorted_rows, sql};

/// The secret access key every test uses: it must never be shown.
const SECRET: &str = "moto-secret-9d41c";

/// moto's S3 server, stopped when dropped (it also stops by itself when
/// its stdin closes or after 30 minutes).
struct S3Server {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl S3Server {
    fn start() -> Self {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/s3/moto_s3.py"
        );
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("python3 runs the S3 server of the tests");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Ok(port) = line.trim().parse() else {
            let mut why = String::new();
            log.reopen().unwrap().read_to_string(&mut why).unwrap();
            panic!("moto's S3 server did not start (pip install 'moto[server]'):\n{why}");
        };
        Self { child, port, log }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Storage options reaching this server with static credentials.
    fn storage_options(&self) -> BTreeMap<String, String> {
        [
            ("aws_endpoint", self.endpoint()),
            ("aws_allow_http", "true".into()),
            ("aws_region", "us-east-1".into()),
            ("aws_access_key_id", "moto-key".into()),
            ("aws_secret_access_key", SECRET.into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The same, as the `OPTIONS` of `CREATE EXTERNAL TABLE`.
    fn options_clause(&self) -> String {
        let options: Vec<String> = self
            .storage_options()
            .iter()
            .map(|(k, v)| format!("'lance.storage.{k}' '{v}'"))
            .collect();
        format!("OPTIONS ({})", options.join(", "))
    }

    /// Requests the server answered with `status`, so far.
    fn answered(&self, status: u16) -> usize {
        let mut log = String::new();
        self.log.reopen().unwrap().read_to_string(&mut log).unwrap();
        log.lines()
            .filter(|l| l.contains(&format!("\" {status} ")))
            .count()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn error(ctx: &SessionContext, statement: &str) -> String {
    match sql(ctx, statement).await {
        Ok(_) => panic!("{statement}: expected an error"),
        Err(e) => format!("{e} / {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_on_s3_are_read_written_deleted_and_merged() {
    let s3 = S3Server::start();
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT) STORED AS LANCE \
             LOCATION 's3://lance/t.lance' {}",
            s3.options_clause()
        ),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value, value * 10 FROM generate_series(1, 1000)",
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(v) FROM t").await,
        vec![1000, 5005000]
    );
    ok(&ctx, "DELETE FROM t WHERE id > 905").await;
    ok(&ctx, "UPDATE t SET v = 0 WHERE id <= 10").await;
    ok(
        &ctx,
        "SELECT * FROM lance_merge('t', (SELECT value AS id, -1 AS v \
         FROM generate_series(895, 905)), 'id')",
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(v) FROM t").await,
        vec![905, 4000089]
    );
    assert_eq!(
        sorted_rows(
            &sql(&ctx, "SELECT version, operation FROM lance_versions('t')")
                .await
                .unwrap()
        ),
        vec![
            "1|Overwrite",
            "2|Append",
            "3|Delete",
            "4|Update",
            "5|Update"
        ]
    );

    // Lance itself reads what we wrote.
    let options: HashMap<String, String> = s3.storage_options().into_iter().collect();
    let dataset = DatasetBuilder::from_uri("s3://lance/t.lance")
        .with_storage_options(options)
        .load()
        .await
        .unwrap();
    assert_eq!(dataset.version().version, 5);
    assert_eq!(dataset.count_rows(None).await.unwrap(), 905);

    // The secret shows in no plan and no error.
    for statement in [
        "EXPLAIN VERBOSE SELECT * FROM t WHERE id > 3",
        "EXPLAIN INSERT INTO t VALUES (1, 1)",
        "SELECT * FROM information_schema.df_settings",
    ] {
        let text = format!("{:?}", sql(&ctx, statement).await.unwrap());
        assert!(!text.contains(SECRET), "{statement} shows the secret");
    }
    let e = error(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE gone STORED AS LANCE LOCATION 's3://no-such-bucket/t.lance' {}",
            s3.options_clause()
        ),
    )
    .await;
    assert!(e.contains("no-such-bucket"), "{e}");
    assert!(!e.contains(SECRET), "{e}");
    let e = error(&ctx, "INSERT INTO t VALUES (NULL, 1)").await;
    assert!(!e.contains(SECRET), "{e}");
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![905]);
}

/// What Lance's commits on S3 rely on: a PUT with `If-None-Match: *` of an
/// object that exists fails. Then eight INSERTs, planned on one version
/// and released together: each commits exactly once, every row lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_inserts_on_s3_each_commit_once() {
    use object_store_014::{PutMode, PutOptions, path::Path};

    let s3 = S3Server::start();
    let options: HashMap<String, String> = s3.storage_options().into_iter().collect();
    let (store, _) = ObjectStore::from_uri_and_params(
        Arc::new(ObjectStoreRegistry::default()),
        "s3://lance/probe",
        &ObjectStoreParams {
            storage_options_accessor: Some(Arc::new(StorageOptionsAccessor::with_static_options(
                options,
            ))),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    let path = Path::from("probe/manifest");
    store
        .inner
        .put_opts(&path, "first".into(), create.clone())
        .await
        .unwrap();
    let second = store.inner.put_opts(&path, "second".into(), create).await;
    assert!(
        matches!(
            second,
            Err(object_store_014::Error::AlreadyExists { .. }
                | object_store_014::Error::Precondition { .. })
        ),
        "{second:?}"
    );
    assert_eq!(s3.answered(412), 1);

    let cache = private_cache();
    let ctx = context(2, &cache);
    let create_table = format!(
        "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, s VARCHAR) STORED AS LANCE \
         LOCATION 's3://lance/c.lance' {}",
        s3.options_clause()
    );
    ok(&ctx, &create_table).await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value, 'initial' FROM generate_series(1, 1000)",
    )
    .await;
    let mut plans: Vec<(Arc<dyn ExecutionPlan>, _)> = Vec::new();
    for k in 1..=8i64 {
        let planner = context(2, &cache);
        ok(&planner, &create_table).await;
        let plan = planner
            .sql(&format!(
                "INSERT INTO t SELECT value + {}, 'k{k}' FROM generate_series(0, 999)",
                k * 10_000
            ))
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        plans.push((plan, planner.task_ctx()));
    }
    let barrier = Arc::new(Barrier::new(plans.len()));
    let runs: Vec<_> = plans
        .into_iter()
        .map(|(plan, task)| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                collect(plan, task).await
            })
        })
        .collect();
    for run in runs {
        assert_eq!(ints_of(&run.await.unwrap().unwrap()), 1000);
    }
    assert_eq!(
        ints(
            &ctx,
            "SELECT max(version), count(*) FILTER (WHERE operation = 'Append') \
             FROM lance_versions('t')"
        )
        .await,
        vec![10, 9],
        "one version per statement"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id) FROM t").await,
        vec![9000, 9000]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_lives_on_s3() {
    let s3 = S3Server::start();
    let ctx = context(2, &private_cache());
    register_lance_catalog(&ctx, "lake", "s3://lance/lake", s3.storage_options())
        .await
        .unwrap();
    ok(
        &ctx,
        "CREATE TABLE lake.public.t AS SELECT value AS id FROM generate_series(1, 100)",
    )
    .await;
    ok(&ctx, "CREATE SCHEMA lake.db").await;
    ok(&ctx, "CREATE TABLE lake.db.u (name VARCHAR)").await;
    ok(&ctx, "INSERT INTO lake.db.u VALUES ('a'), ('b')").await;
    let listed = sorted_rows(
        &sql(
            &ctx,
            "SELECT table_schema, table_name FROM information_schema.tables \
             WHERE table_catalog = 'lake' AND table_schema <> 'information_schema'",
        )
        .await
        .unwrap(),
    );
    assert_eq!(listed, vec!["db|u", "public|t"]);
    assert_eq!(
        ints(&ctx, "SELECT sum(id) FROM lake.public.t").await,
        vec![5050]
    );
    assert_eq!(ints(&ctx, "SELECT count(*) FROM lake.db.u").await, vec![2]);

    // Another context attaching the same root sees the same tables.
    let other = context(2, &private_cache());
    register_lance_catalog(&other, "lake", "s3://lance/lake", s3.storage_options())
        .await
        .unwrap();
    assert_eq!(
        ints(&other, "SELECT count(*) FROM lake.db.u").await,
        vec![2]
    );
    ok(&ctx, "DROP TABLE lake.db.u").await;
    let e = error(&other, "SELECT * FROM lake.db.u").await;
    assert!(e.contains("lake.db.u"), "{e}");
    assert!(!e.contains(SECRET), "{e}");
}

/// `lance-sql` with only the standard AWS environment variables (never
/// the instance metadata service: 127.0.0.1 is the only address reached).
fn lance_sql(s3: &S3Server, home: &std::path::Path, credentials: bool, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lance-sql"));
    command
        .env_clear()
        .env("HOME", home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT", s3.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .args(["-q", "--format", "csv"])
        .args(args);
    if credentials {
        command
            .env("AWS_ACCESS_KEY_ID", "moto-key")
            .env("AWS_SECRET_ACCESS_KEY", SECRET);
    }
    command.output().unwrap()
}

/// `lance-sql` takes its credentials and endpoint from the environment,
/// and without credentials fails saying so; a catalog on S3 from the
/// command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lance_sql_reads_credentials_from_the_environment() {
    let s3 = S3Server::start();
    let home = tempfile::tempdir().unwrap();
    let table = "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE \
                 LOCATION 's3://lance/cli.lance'";
    let out = lance_sql(
        &s3,
        home.path(),
        true,
        &[
            "-c",
            table,
            "-c",
            "INSERT INTO t SELECT value FROM generate_series(1, 10)",
            "-c",
            "SELECT sum(id) AS s FROM t",
            "-c",
            "EXPLAIN SELECT * FROM t WHERE id > 3",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("s\n55\n"), "{stdout}");
    assert!(stdout.contains("LanceScanExec"), "{stdout}");
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));

    let out = lance_sql(
        &s3,
        home.path(),
        false,
        &["-c", table, "-c", "SELECT count(*) FROM t"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.to_lowercase().contains("credential"), "{stderr}");

    let out = lance_sql(
        &s3,
        home.path(),
        true,
        &[
            "--catalog",
            "lake=s3://lance/lake",
            "-c",
            "CREATE TABLE lake.public.n AS SELECT value AS id FROM generate_series(1, 4)",
            "-c",
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake' \
             AND table_schema = 'public'",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.ends_with("table_name\nn\n"), "{stdout}");
}
