//! Failed writes change nothing: every writing statement failed at every
//! stage by the object store (including after some files of a partition were
//! written), late expression errors, NULLs in NOT NULL columns, plan-time
//! errors, a dropped result stream and a killed process — each leaves the
//! table at a committed state, removes what it wrote (where the process
//! survives) and leaves the table writable.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::Int64Array;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::datatypes::Field;
use datafusion::arrow::datatypes::Schema;
use datafusion::datasource::MemTable;
use datafusion_lance::LanceTableProvider;
use rand::{Rng, SeedableRng};

use crate::support::faults::Fault;
use crate::support::faults::{FaultInjector, faulty_table};
use crate::support::{INITIAL, all_files, assert_unchanged, nightly, setup, setup_at, snapshot};
use crate::support::{
    context, dataset_path, ints, ok, private_cache, referenced_files, sql, state, stored_files,
    validates,
};

/// The writing statements, on the fault-injected table `ft`.
const STATEMENTS: &[(&str, &str)] = &[
    (
        "INSERT",
        "INSERT INTO ft SELECT value, 0, 'new' FROM generate_series(1000, 1299)",
    ),
    (
        "INSERT OVERWRITE",
        "INSERT OVERWRITE ft SELECT value, 0, 'new' FROM generate_series(1000, 1299)",
    ),
    ("TRUNCATE", "TRUNCATE TABLE ft"),
    (
        "lance_merge",
        "SELECT * FROM lance_merge('ft', (SELECT value AS id, 7 AS v, 'm' AS tag \
         FROM generate_series(50, 349)), 'id')",
    ),
    (
        "MERGE INTO",
        "MERGE INTO ft USING (SELECT value AS id, 'mi' AS tag FROM generate_series(50, 349)) AS s \
         ON ft.id = s.id WHEN MATCHED THEN UPDATE SET tag = s.tag \
         WHEN NOT MATCHED THEN INSERT (id, tag) VALUES (s.id, s.tag)",
    ),
    (
        "INSERT OR REPLACE",
        "INSERT OR REPLACE INTO ft SELECT value, 9, 'r' FROM generate_series(50, 349)",
    ),
    ("DELETE", "DELETE FROM ft WHERE id % 3 = 0"),
    ("UPDATE", "UPDATE ft SET v = v + 1 WHERE id % 3 = 0"),
];

/// Where a write can fail.
struct Stage {
    name: &'static str,
    rules: &'static [(&'static str, &'static str)],
    /// Matching calls that succeed before the faults start.
    skip: usize,
}

const DATA_FILES: &[(&str, &str)] = &[
    ("put", "/data/"),
    ("put_multipart", "/data/"),
    ("put", "/_deletions/"),
    ("put_multipart", "/_deletions/"),
];

const STAGES: &[Stage] = &[
    Stage {
        name: "first data file",
        rules: DATA_FILES,
        skip: 0,
    },
    // Every statement writes several files (64 rows per data file, deletion
    // files for the fragments it touches): some exist when the failure comes,
    // and must be removed.
    Stage {
        name: "data files after one was written",
        rules: DATA_FILES,
        skip: 1,
    },
    Stage {
        name: "transaction file",
        rules: &[
            ("put", "/_transactions/"),
            ("put_multipart", "/_transactions/"),
        ],
        skip: 0,
    },
    Stage {
        name: "manifest",
        rules: &[
            ("put", "/_versions/"),
            ("put_multipart", "/_versions/"),
            ("rename", "/_versions/"),
            ("copy", "/_versions/"),
        ],
        skip: 0,
    },
];

/// Stages a statement reaches: TRUNCATE writes no data file.
fn reaches(statement: &str, stage: &Stage) -> bool {
    !(statement == "TRUNCATE" && stage.rules == DATA_FILES)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn store_faults_at_every_stage_of_every_write_change_nothing() {
    for (s, (statement, sql_text)) in STATEMENTS.iter().enumerate() {
        for (g, stage) in STAGES.iter().enumerate() {
            if !reaches(statement, stage) {
                continue;
            }
            // shared memory: every read and write goes through the wrapper
            let uri = format!("shared-memory://fault-{s}-{g}/t.lance");
            let ctx = context(2, &private_cache());
            let faults = FaultInjector::new();
            faulty_table(&ctx, &uri, &faults).await;
            ok(&ctx, "SET lance.max_rows_per_file = 64").await;
            let before = state(&ctx).await;
            faults.fail_after(stage.rules, stage.skip);
            let result = sql(&ctx, sql_text).await;
            let injected = faults.injected();
            faults.clear();
            let what = format!("{statement} / {}", stage.name);
            let err = match result {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{what}: succeeded despite {injected} faults"),
            };
            assert!(injected > 0, "{what}: the fault never fired");
            assert!(err.contains("injected fault"), "{what}: {err}");
            assert_eq!(state(&ctx).await, before, "{what}: the table changed");
            validates(&uri).await;
            assert_eq!(
                stored_files(&uri).await,
                referenced_files(&uri).await,
                "{what}: the failed statement left files behind"
            );
            // The next statement succeeds.
            ok(&ctx, sql_text).await;
            validates(&uri).await;
        }
    }
}

/// `COPY (query) TO '<url>' STORED AS LANCE` failed at every stage creates
/// no table and leaves no file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copy_to_lance_failed_at_every_stage_creates_nothing() {
    for (g, stage) in STAGES.iter().enumerate() {
        let cache = private_cache();
        let ctx = context(2, &cache);
        let faults = FaultInjector::new();
        faults.register_scheme(cache.session());
        ok(&ctx, "SET lance.max_rows_per_file = 64").await;
        let bucket = format!("copy-fault-{g}");
        let copy = format!(
            "COPY (SELECT value AS id, 'c' AS tag FROM generate_series(0, 499)) \
             TO 'faulty://{bucket}/c.lance' STORED AS LANCE"
        );
        faults.fail_after(stage.rules, stage.skip);
        let err = sql(&ctx, &copy).await.unwrap_err().to_string();
        let what = format!("COPY / {}", stage.name);
        assert!(faults.injected() > 0, "{what}: the fault never fired");
        assert!(err.contains("injected fault"), "{what}: {err}");
        faults.clear();
        let shared = format!("shared-memory://{bucket}/c.lance");
        assert!(
            lance::Dataset::open(&shared).await.is_err(),
            "{what}: a dataset was created"
        );
        assert!(
            stored_files(&shared).await.is_empty(),
            "{what}: files left behind"
        );
        // The next COPY creates it.
        ok(&ctx, &copy).await;
        assert_eq!(
            lance::Dataset::open(&shared)
                .await
                .unwrap()
                .count_rows(None)
                .await
                .unwrap(),
            500
        );
    }
}

/// A `COPY` whose target gets a table while the `COPY` writes its files
/// fails, and removes the files it wrote (they lie in the other table's data
/// directory); the other table is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_overtaken_by_a_create_leaves_no_file() {
    let cache = private_cache();
    // One writer: it has checked the target before the other table appears,
    // so the commit is what finds it.
    let ctx = context(1, &cache);
    let faults = FaultInjector::new();
    faults.register_scheme(cache.session());
    ok(&ctx, "SET lance.max_rows_per_file = 64").await;
    let shared = "shared-memory://copy-overtaken/c.lance";
    // Another writer creates the table before the COPY's first data file is
    // stored: the COPY checked the target was free when it started.
    faults.before_call("put", "/data/", 1, None, 1, move || {
        crate::support::create_elsewhere(shared, 0, 100)
    });
    let error = sql(
        &ctx,
        "COPY (SELECT value AS id FROM generate_series(0, 499)) \
         TO 'faulty://copy-overtaken/c.lance' STORED AS LANCE",
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(faults.hooks_run(), 1, "the other writer never ran");
    assert!(
        error.contains("a Lance dataset already exists at 'faulty://copy-overtaken/c.lance'"),
        "{error}"
    );
    let other = referenced_files(shared).await;
    assert!(!other.is_empty());
    assert_eq!(
        stored_files(shared).await,
        other,
        "the COPY left files behind"
    );
    let table = lance::Dataset::open(shared).await.unwrap();
    assert_eq!(table.version().version, 1);
    assert_eq!(table.count_rows(None).await.unwrap(), 100);
}

/// A statement cancelled through `datafusion_lance::cancel` (what Ctrl-C
/// does in `lance-sql`) fails like any failed statement: nothing committed,
/// nothing left behind; the next statement runs. `TRUNCATE` reads nothing
/// and commits at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_write_commits_nothing_and_leaves_no_file() {
    use datafusion_lance::cancel::{CANCELLED, Cancellation};
    let copy = (
        "COPY",
        "COPY (SELECT value AS id FROM generate_series(0, 499)) \
         TO 'shared-memory://cancelled-copy/c.lance' STORED AS LANCE",
    );
    for (s, (statement, sql_text)) in STATEMENTS.iter().chain([&copy]).enumerate() {
        if *statement == "TRUNCATE" {
            continue;
        }
        let uri = format!("shared-memory://cancelled-{s}/t.lance");
        let ctx = context(2, &private_cache());
        faulty_table(&ctx, &uri, &FaultInjector::new()).await;
        ok(&ctx, "SET lance.max_rows_per_file = 64").await;
        let before = state(&ctx).await;
        Cancellation::install(&ctx).cancel();
        let error = match sql(&ctx, sql_text).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{statement}: ran to the end though cancelled"),
        };
        assert!(error.contains(CANCELLED), "{statement}: {error}");
        Cancellation::install(&ctx);
        assert_eq!(state(&ctx).await, before, "{statement}: the table changed");
        assert_eq!(
            stored_files(&uri).await,
            referenced_files(&uri).await,
            "{statement}: the cancelled statement left files behind"
        );
        assert!(
            stored_files("shared-memory://cancelled-copy/c.lance")
                .await
                .is_empty(),
            "{statement}: the cancelled COPY left files behind"
        );
        ok(&ctx, sql_text).await;
        validates(&uri).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_insert_commits_nothing() {
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
        "INSERT INTO t SELECT value FROM generate_series(0, 9)",
    )
    .await;
    ok(&ctx, "SET lance.max_rows_per_file = 1000").await;
    let before = state(&ctx).await;
    let files_before = std::fs::read_dir(format!("{uri}/data")).unwrap().count();
    let insert = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            sql(
                &ctx,
                "INSERT INTO t SELECT value FROM generate_series(1000, 3000000)",
            )
            .await
        })
    };
    // Wait for the first data file of the statement, then drop it.
    let mut waited = 0;
    while std::fs::read_dir(format!("{uri}/data")).unwrap().count() == files_before {
        tokio::time::sleep(Duration::from_millis(5)).await;
        waited += 1;
        assert!(waited < 12_000, "no data file appeared");
    }
    insert.abort();
    let _ = insert.await;
    assert_eq!(state(&ctx).await, before, "nothing is visible");
    // The next statement works; the leftovers are vacuumed.
    ok(&ctx, "INSERT INTO t VALUES (10)").await;
    ok(
        &ctx,
        "SELECT * FROM lance_vacuum('t', 'older_than=0s', 'orphans_older_than=0s')",
    )
    .await;
    assert_eq!(stored_files(&uri).await, referenced_files(&uri).await);
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![11]);
}

/// `lance_vacuum` with a zero orphan age, run while an INSERT of the same
/// process has written data files no version references yet, keeps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vacuum_keeps_the_files_of_a_write_in_flight() {
    let uri = "shared-memory://vacuum-in-flight/t.lance";
    let ctx = context(2, &private_cache());
    let faults = FaultInjector::new();
    faulty_table(&ctx, uri, &faults).await;
    ok(&ctx, "SET lance.max_rows_per_file = 10").await;
    let before = stored_files(uri).await;
    faults.delay("put", "/data/", 100);
    faults.delay("put_multipart", "/data/", 100);
    let writer = {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            sql(
                &ctx,
                "INSERT INTO ft SELECT value, 1, 'x' FROM generate_series(100, 199)",
            )
            .await
        })
    };
    // Wait until the statement has written a file no version references.
    while stored_files(uri).await.len() == before.len() {
        assert!(!writer.is_finished(), "the INSERT ended before writing");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let removed = ints(
        &ctx,
        &format!(
            "SELECT orphans_removed FROM lance_vacuum('{uri}', 'older_than=0s', 'orphans_older_than=0s')"
        ),
    )
    .await;
    assert_eq!(removed, vec![0]);
    writer.await.unwrap().unwrap();
    faults.clear();
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*), count(DISTINCT id) FROM ft WHERE id >= 0"
        )
        .await,
        vec![200, 200]
    );
    validates(uri).await;
    assert_eq!(stored_files(uri).await, referenced_files(uri).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_expression_error_commits_nothing_and_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(4, &private_cache());
    let uri = setup(&dir, &ctx).await;
    sql(&ctx, "SET lance.max_rows_per_file = 20").await.unwrap();
    let before = snapshot(&ctx, &uri).await;

    let err = sql(
        &ctx,
        "INSERT INTO t SELECT CASE WHEN id > 990 THEN CAST(s AS BIGINT) ELSE id + 1000 END, s FROM src",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("Cannot cast string"), "{err}");
    assert_unchanged(&ctx, &uri, before).await;

    // The next statement succeeds.
    sql(&ctx, "INSERT INTO t SELECT id + 1000, s FROM src")
        .await
        .unwrap();
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t").await,
        vec![INITIAL + 941]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_null_in_the_last_batch_of_the_last_partition_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(4, &private_cache());
    let uri = setup(&dir, &ctx).await;
    sql(&ctx, "SET lance.max_rows_per_file = 50").await.unwrap();

    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("label", DataType::Utf8, true),
    ]));
    let batch = |start: i64, null_last: bool| {
        let ids: Vec<Option<i64>> = (start..start + 100)
            .map(|i| (!(null_last && i == start + 99)).then_some(i))
            .collect();
        RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(vec![Some("x"); 100])),
            ],
        )
        .unwrap()
    };
    let partitions: Vec<Vec<RecordBatch>> = (0..4)
        .map(|p| {
            (0..3)
                .map(|b| batch(10_000 + p * 1000 + b * 100, p == 3 && b == 2))
                .collect()
        })
        .collect();
    ctx.register_table(
        "mem",
        Arc::new(MemTable::try_new(schema, partitions).unwrap()),
    )
    .unwrap();
    let before = snapshot(&ctx, &uri).await;

    let err = sql(&ctx, "INSERT INTO t SELECT * FROM mem")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("column 'id' of table 't' is NOT NULL but the inserted data holds NULL"),
        "{err}"
    );
    assert_unchanged(&ctx, &uri, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_object_store_write_failure_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(4, &private_cache());
    // Local files bypass object-store wrappers for writes; shared memory does not.
    let uri = setup_at(&dir, &ctx, "shared-memory://write-fault/t.lance").await;

    // The same table, opened through a store that fails the 3rd data-file write.
    let faults = FaultInjector::new();
    let faulty = LanceTableProvider::builder(&uri)
        .with_name("faulty")
        .with_store_params(faults.params())
        .build()
        .await
        .unwrap();
    ctx.register_table("faulty", Arc::new(faulty)).unwrap();
    sql(&ctx, "SET lance.max_rows_per_file = 20").await.unwrap();
    let before = snapshot(&ctx, &uri).await;

    for operation in ["put", "put_multipart"] {
        faults.fail(Fault {
            operation,
            pattern: "/data/",
            skip: 2,
            times: usize::MAX,
            shared: None,
        });
    }
    let err = sql(&ctx, "INSERT INTO faulty SELECT id + 1000, s FROM src")
        .await
        .unwrap_err()
        .to_string();
    assert!(faults.injected() > 0, "the fault never fired");
    assert!(err.contains("injected fault"), "{err}");
    assert_unchanged(&ctx, &uri, before).await;

    // Once the store recovers, the same statement succeeds.
    faults.clear();
    sql(&ctx, "INSERT INTO faulty SELECT id + 1000, s FROM src")
        .await
        .unwrap();
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t").await,
        vec![INITIAL + 941]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plan_time_errors_write_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(4, &private_cache());
    let uri = setup(&dir, &ctx).await;
    let before = all_files(std::path::Path::new(&uri));
    for bad in [
        "INSERT INTO t VALUES (1, 'a', 'extra')",
        "INSERT INTO t (id, nope) VALUES (1, 'a')",
        "INSERT INTO t SELECT id FROM src WHERE nope > 1",
        "INSERT INTO missing VALUES (1, 'a')",
        "INSERT INTO t SELECT [1, 2], s FROM src",
        "UPDATE t SET nope = 1",
        "DELETE FROM t WHERE nope = 1",
        "SELECT * FROM lance_merge('t', (SELECT id FROM src), 'nope')",
        "SELECT * FROM lance_merge('t', (SELECT id, s AS label FROM src), 'id', 'when_matched=sometimes')",
    ] {
        let err = sql(&ctx, bad).await.unwrap_err().to_string();
        assert!(!err.is_empty());
        assert_eq!(
            all_files(std::path::Path::new(&uri)),
            before,
            "{bad} ({err}) wrote files"
        );
    }
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t").await,
        vec![INITIAL],
        "rows unchanged"
    );
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
