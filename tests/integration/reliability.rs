//! Nothing is lost: object-store faults at every stage of every write,
//! transient and permanent read faults, cancellation, corrupt metadata,
//! process kills, edge values and secrets.
//!
//! Every check ends by verifying the exact expected rows (count, sum,
//! distinct ids) and version. `DATAFUSION_LANCE_NIGHTLY=1` runs the big tier
//! (`make test-nightly`).

use std::time::Duration;

use datafusion::arrow::array::{Array, BinaryArray, Float64Array};
use rand::{Rng, SeedableRng};

use crate::faults::{Fault, FaultInjector, faulty_table};
use crate::util::{context, dataset_path, ints, ok, private_cache, referenced_files, sql};

pub(crate) fn nightly() -> bool {
    std::env::var("DATAFUSION_LANCE_NIGHTLY").is_ok_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_read_faults_never_lose_rows() {
    let uri = "shared-memory://read-faults/t.lance";
    let ctx = context(3, &private_cache());
    let faults = FaultInjector::new();
    faulty_table(&ctx, uri, &faults).await;
    ok(&ctx, "SET lance.max_rows_per_file = 10").await;
    ok(
        &ctx,
        "INSERT INTO ft SELECT value, 1, 'x' FROM generate_series(100, 999)",
    )
    .await;
    let expected = ints(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0").await;
    assert_eq!(expected, vec![1000, 999 * 1000 / 2]);
    assert!(
        !faults.calls("/data/").is_empty(),
        "reads go through the wrapper"
    );
    // a slow store changes nothing
    faults.delay("get_ranges", "/data/", 2);
    for round in 0..6 {
        // the first reads of data files fail, a few at a time
        for operation in ["get_opts", "get_ranges"] {
            faults.fail(Fault {
                operation,
                pattern: "/data/",
                skip: round,
                times: 1 + round % 3,
                shared: None,
            });
        }
        match sql(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0").await {
            Ok(batches) => {
                let got = crate::util::sorted_rows(&batches);
                assert_eq!(
                    got,
                    vec![format!("{}|{}", expected[0], expected[1])],
                    "round {round}"
                );
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("/data/") && text.contains(".lance"),
                    "round {round}: the error names no data file: {text}"
                );
            }
        }
        faults.clear();
    }
    // One data file that can never be read: an error naming it, never a short result.
    let victim = referenced_files(uri)
        .await
        .into_iter()
        .find(|f| f.starts_with("data/"))
        .unwrap();
    let pattern: &'static str = Box::leak(format!("/{victim}").into_boxed_str());
    faults.fail(Fault::always("get_opts", pattern));
    faults.fail(Fault::always("get_ranges", pattern));
    let err = sql(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("injected fault"), "{err}");
    assert!(err.contains(&victim), "the error names no file: {err}");
    assert!(faults.injected() > 0);
    faults.clear();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_metadata_is_reported_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(0, 99)",
    )
    .await;
    ok(&ctx, &format!(
        "CREATE EXTERNAL TABLE t2 STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.version' '2')"
    ))
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(100, 199)",
    )
    .await;
    let manifests = |uri: &str| -> Vec<std::path::PathBuf> {
        let mut m: Vec<_> = std::fs::read_dir(format!("{uri}/_versions"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "manifest"))
            .collect();
        m.sort();
        m
    };
    // V2 manifest names sort newest first.
    let latest = manifests(&uri)[0].clone();

    // 1. a truncated latest manifest: an error naming the file, no panic
    let bytes = std::fs::read(&latest).unwrap();
    std::fs::write(&latest, &bytes[..bytes.len() / 2]).unwrap();
    let fresh = context(2, &private_cache());
    let err = sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE c STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("manifest") || err.contains("_versions"),
        "{err}"
    );
    // the pinned older version still reads
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(id) FROM t2 WHERE id >= 0").await,
        vec![100, 4950]
    );
    std::fs::write(&latest, &bytes).unwrap();

    // 2. garbage at a new manifest location
    let garbage = latest.with_file_name("18446744073709551611.manifest");
    std::fs::write(&garbage, b"this is not a manifest").unwrap();
    let fresh = context(2, &private_cache());
    let err = sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE c STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("manifest") || err.contains("_versions"),
        "{err}"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t2 WHERE id >= 0").await,
        vec![100]
    );
    std::fs::remove_file(&garbage).unwrap();

    // 3. a referenced data file deleted: the scan fails naming it
    let victim = referenced_files(&uri)
        .await
        .into_iter()
        .find(|f| f.starts_with("data/"))
        .unwrap();
    std::fs::remove_file(format!("{uri}/{victim}")).unwrap();
    let fresh = context(2, &private_cache());
    ok(
        &fresh,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let err = sql(&fresh, "SELECT sum(id) FROM t WHERE id >= 0")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&victim), "the error names no file: {err}");
    // no write happened anywhere
    assert_eq!(manifests(&uri).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_values_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, i BIGINT, f DOUBLE, s VARCHAR, b BYTEA, \
             ts TIMESTAMP, d DECIMAL(38, 10), l BIGINT[], st STRUCT<a INT, inner STRUCT<x VARCHAR>>, \
             emb FLOAT[3], allnull INT) STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    let big = "ab".repeat(256 * 1024); // 256 KiB once decoded
    ok(
        &ctx,
        &format!(
            "INSERT INTO t VALUES \
             (1, -9223372036854775808, -0.0, 'nul' || chr(0) || ' and ''quotes'' \"dq\"', X'00FF', \
              TIMESTAMP '1677-09-21T00:12:43.145224192', \
              CAST('9999999999999999999999999999.9999999999' AS DECIMAL(38, 10)), \
              [], named_struct('a', 1, 'inner', named_struct('x', 'deep')), [0.5, -0.0, 1e30], NULL), \
             (2, 9223372036854775807, 0.0, '', decode('{big}', 'hex'), \
              TIMESTAMP '2262-04-11T23:47:16.854775807', \
              CAST('-9999999999999999999999999999.9999999999' AS DECIMAL(38, 10)), \
              [NULL, 1], NULL, NULL, NULL), \
             (3, NULL, 'NaN', NULL, NULL, NULL, 0, NULL, named_struct('a', CAST(NULL AS INT), 'inner', CAST(NULL AS STRUCT<x VARCHAR>)), [1, 2, 3], NULL), \
             (4, 0, 'inf', 'x', X'', NULL, NULL, [-1], NULL, NULL, NULL), \
             (5, 0, '-inf', 'x', NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
        ),
    )
    .await;
    let rows = crate::util::sorted_rows(
        &sql(&ctx, "SELECT id, i, s, ts, d, l, st, emb, allnull FROM t")
            .await
            .unwrap(),
    );
    assert_eq!(
        rows,
        vec![
            "1|-9223372036854775808|nul\0 and 'quotes' \"dq\"|1677-09-21T00:12:43.145224192|9999999999999999999999999999.9999999999|[]|{a: 1, inner: {x: deep}}|[0.5, -0.0, 1e30]|NULL".to_string(),
            "2|9223372036854775807||2262-04-11T23:47:16.854775807|-9999999999999999999999999999.9999999999|[NULL, 1]|NULL|NULL|NULL".to_string(),
            "3|NULL|NULL|NULL|0.0000000000|NULL|{a: NULL, inner: NULL}|[1.0, 2.0, 3.0]|NULL".to_string(),
            "4|0|x|NULL|NULL|[-1]|NULL|NULL|NULL".to_string(),
            "5|0|x|NULL|NULL|NULL|NULL|NULL|NULL".to_string(),
        ]
    );
    // binary values byte for byte, a 256 KiB one included
    let batches = sql(&ctx, "SELECT b FROM t ORDER BY id").await.unwrap();
    let b: Vec<Option<Vec<u8>>> = batches
        .iter()
        .flat_map(|batch| {
            let a = batch
                .column(0)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .unwrap();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| a.value(i).to_vec()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(b[0].as_deref(), Some(&[0x00u8, 0xff][..]));
    assert_eq!(b[1].as_deref(), Some(&vec![0xabu8; 256 * 1024][..]));
    assert_eq!(b[2], None);
    assert_eq!(b[3].as_deref(), Some(&[][..]));

    // floats bit for bit: the sign of zero, NaN, infinities
    let batches = sql(&ctx, "SELECT f FROM t ORDER BY id").await.unwrap();
    let f: Vec<f64> = batches
        .iter()
        .flat_map(|b| {
            let a = b.column(0).as_any().downcast_ref::<Float64Array>().unwrap();
            (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(f[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(f[1].to_bits(), 0.0f64.to_bits());
    assert!(f[2].is_nan());
    assert_eq!(f[3], f64::INFINITY);
    assert_eq!(f[4], f64::NEG_INFINITY);

    // 100 columns
    let columns: Vec<String> = (0..100).map(|i| format!("c{i} INT")).collect();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE wide ({}) STORED AS LANCE LOCATION '{}'",
            columns.join(", "),
            dataset_path(&dir, "wide.lance")
        ),
    )
    .await;
    let values: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    ok(
        &ctx,
        &format!("INSERT INTO wide VALUES ({})", values.join(", ")),
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT c0, c42, c99 FROM wide").await,
        vec![0, 42, 99]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_appear_in_plans_or_errors() {
    const SECRET: &str = "SUPERSECRET-7f3a";
    let logs = LogCapture::start();
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.storage.aws_secret_access_key' '{SECRET}')"
        ),
    )
    .await;
    ok(&ctx, "INSERT INTO t VALUES (1), (2)").await;
    for statement in [
        "EXPLAIN SELECT * FROM t WHERE id > 1",
        "EXPLAIN VERBOSE SELECT * FROM t WHERE id > 1",
        "EXPLAIN INSERT INTO t VALUES (3)",
        "EXPLAIN VERBOSE DELETE FROM t WHERE id = 1",
        "EXPLAIN ANALYZE SELECT * FROM t WHERE id > 1",
        "SELECT * FROM information_schema.df_settings",
    ] {
        let text = format!("{:?}", sql(&ctx, statement).await.unwrap());
        assert!(!text.contains(SECRET), "{statement} shows the secret");
    }
    let provider = ctx.table_provider("t").await.unwrap();
    assert!(!format!("{provider:?}").contains(SECRET));
    // errors: an unreachable store with credentials
    for statement in [
        format!(
            "CREATE EXTERNAL TABLE s3t STORED AS LANCE LOCATION 's3://no-such-bucket/t.lance' OPTIONS ('lance.storage.aws_secret_access_key' '{SECRET}', 'lance.storage.aws_access_key_id' 'AKIA{SECRET}')"
        ),
        format!(
            "CREATE EXTERNAL TABLE bad STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.storage.aws_secret_access_key' '{SECRET}', 'lance.nope' '1')"
        ),
        format!(
            "CREATE EXTERNAL TABLE bad STORED AS LANCE LOCATION 's3://user:{SECRET}@bucket/t.lance'"
        ),
    ] {
        let err = sql(&ctx, &statement).await.unwrap_err();
        assert!(
            !err.to_string().contains(SECRET),
            "error shows the secret: {err}"
        );
        assert!(
            !format!("{err:?}").contains(SECRET),
            "error debug shows the secret: {err:?}"
        );
    }
    log::info!(target: "secrets-test", "capture works");
    let lines = logs.stop();
    assert!(lines.iter().any(|l| l.contains("capture works")));
    for line in &lines {
        assert!(
            !line.contains(SECRET),
            "a log record shows the secret: {line}"
        );
    }
}

/// Captures every `log` record (at any level) while it is running.
struct LogCapture;

static CAPTURING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static CAPTURED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

impl log::Log for LogCapture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        CAPTURING.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = format!("{} {}: {}", record.level(), record.target(), record.args());
            CAPTURED.lock().unwrap().push(line);
        }
    }

    fn flush(&self) {}
}

impl LogCapture {
    fn start() -> Self {
        // The first test to start a capture installs the logger.
        let _ = log::set_logger(&LogCapture);
        log::set_max_level(log::LevelFilter::Trace);
        CAPTURING.store(true, std::sync::atomic::Ordering::SeqCst);
        LogCapture
    }

    fn stop(self) -> Vec<String> {
        CAPTURING.store(false, std::sync::atomic::Ordering::SeqCst);
        std::mem::take(&mut *CAPTURED.lock().unwrap())
    }
}

/// Kills `lance-sql` in the middle of a large INSERT: the table always opens,
/// at the previous version with N rows or the next with N + M, never between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_insert_leaves_a_committed_state() {
    let trials = if nightly() { 20 } else { 3 };
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(0, 999)",
    )
    .await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x51_61_4b);
    let (mut n, m) = (1000i64, 3_000_000i64);
    let mut outcomes = (0, 0);
    for trial in 0..trials {
        let before = ints(&ctx, "SELECT max(version) FROM lance_versions('t')").await[0];
        let start = n + 1_000_000 * trial as i64;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lance-sql"))
            .args([
                "-q",
                "-c",
                &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
                "-c",
                "SET lance.max_rows_per_file = 20000",
                "-c",
                &format!(
                    "INSERT INTO t SELECT value FROM generate_series({start}, {})",
                    start + m - 1
                ),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill while data files are being written: when the k-th new data
        // file appears. The statement writes 150 files before it commits, so
        // every kill lands before the commit.
        let files = std::fs::read_dir(format!("{uri}/data")).unwrap().count();
        let k = rng.random_range(1..=40);
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while std::fs::read_dir(format!("{uri}/data")).unwrap().count() < files + k {
            assert!(
                std::time::Instant::now() < deadline,
                "trial {trial}: lance-sql wrote no {k}th data file"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "trial {trial}: lance-sql ended before its {k}th data file"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let fresh = context(2, &private_cache());
        ok(
            &fresh,
            &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
        )
        .await;
        let version = ints(&fresh, "SELECT max(version) FROM lance_versions('t')").await[0];
        let count = ints(&fresh, "SELECT count(*) FROM t").await[0];
        match (version - before, count - n) {
            (0, 0) => outcomes.0 += 1,
            (1, added) if added == m => {
                outcomes.1 += 1;
                n += m;
            }
            other => panic!(
                "trial {trial}: version +{}, rows +{} (expected +0/+0 or +1/+{m})",
                other.0, other.1
            ),
        }
        // the next INSERT succeeds
        ok(&fresh, "INSERT INTO t VALUES (-1)").await;
        ok(&fresh, "DELETE FROM t WHERE id = -1").await;
    }
    println!(
        "SIGKILL trials: {} killed before the commit, {} after",
        outcomes.0, outcomes.1
    );
    assert_eq!(outcomes, (trials, 0), "every kill landed before the commit");
}
