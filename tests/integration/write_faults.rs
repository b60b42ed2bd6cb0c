//! Every writing statement, failed at every stage by the object store —
//! including after some files of a partition were written — changes nothing,
//! removes what it wrote, and leaves the table writable.

use std::time::Duration;

use crate::faults::{FaultInjector, faulty_table};
use crate::util::{
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
