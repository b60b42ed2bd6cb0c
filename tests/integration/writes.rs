//! Write path: failures commit nothing and leave no files; concurrent
//! statements each commit exactly once; readers see only committed states.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use datafusion_lance::{LanceSessionCache, LanceTableProvider};
use futures::StreamExt;
use lance::dataset::builder::DatasetBuilder;
use tokio::sync::Barrier;

use crate::faults::{Fault, FaultInjector};
use crate::fixtures::numbers;
use crate::util::{context, dataset_path, ints, private_cache, validates};

/// Every file under `<uri>/data` (any object store Lance can open).
async fn data_files(uri: &str) -> BTreeSet<String> {
    let (store, base, _) = DatasetBuilder::from_uri(uri)
        .build_object_store()
        .await
        .unwrap();
    let prefix = base.join("data");
    store
        .inner
        .list(Some(&prefix))
        .map(|meta| meta.unwrap().location.to_string())
        .collect()
        .await
}

async fn sql(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

/// `statement` planned (not run) in a fresh context on `t` at `uri`: it has
/// read the table's current version. Run it with `collect(plan, task)`.
async fn planned(
    cache: &Arc<LanceSessionCache>,
    uri: &str,
    statement: &str,
) -> (
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    Arc<datafusion::execution::TaskContext>,
) {
    let ctx = context(2, cache);
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let plan = ctx
        .sql(statement)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    (plan, ctx.task_ctx())
}

async fn version(ctx: &SessionContext, table: &str) -> i64 {
    ints(
        ctx,
        &format!("SELECT max(version) FROM lance_versions('{table}')"),
    )
    .await[0]
}

/// A table `t (id BIGINT NOT NULL, label VARCHAR)` holding the 94 ids of
/// `numbers` below 100, and the `numbers` fixture registered as `src`.
async fn setup(dir: &tempfile::TempDir, ctx: &SessionContext) -> String {
    setup_at(dir, ctx, &dataset_path(dir, "t.lance")).await
}

const INITIAL: i64 = 94;

async fn setup_at(dir: &tempfile::TempDir, ctx: &SessionContext, uri: &str) -> String {
    let uri = uri.to_string();
    let src = dataset_path(dir, "numbers.lance");
    numbers(&src).await;
    sql(
        ctx,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{src}'"),
    )
    .await
    .unwrap();
    sql(
        ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, label VARCHAR) STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await
    .unwrap();
    sql(ctx, "INSERT INTO t SELECT id, s FROM src WHERE id < 100")
        .await
        .unwrap();
    uri
}

/// The table is exactly as before: version, rows, and files on disk.
async fn assert_unchanged(
    ctx: &SessionContext,
    uri: &str,
    before: (i64, Vec<i64>, BTreeSet<String>),
) {
    assert_eq!(version(ctx, "t").await, before.0, "no new version");
    assert_eq!(
        ints(ctx, "SELECT count(*), sum(id) FROM t").await,
        before.1,
        "content unchanged"
    );
    assert_eq!(data_files(uri).await, before.2, "no data file left behind");
}

async fn snapshot(ctx: &SessionContext, uri: &str) -> (i64, Vec<i64>, BTreeSet<String>) {
    (
        version(ctx, "t").await,
        ints(ctx, "SELECT count(*), sum(id) FROM t").await,
        data_files(uri).await,
    )
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
async fn eight_concurrent_inserts_each_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(2, &cache);
    let uri = setup(&dir, &ctx).await;
    let v0 = version(&ctx, "t").await;

    // All eight are planned on version v0 before any runs; then they run
    // together: every commit but the first rebases onto the others.
    let mut plans = Vec::new();
    for k in 1..=8i64 {
        let statement = format!(
            "INSERT INTO t SELECT value + {}, 'k{k}' FROM generate_series(0, 999)",
            k * 10_000
        );
        plans.push(planned(&cache, &uri, &statement).await);
    }
    let barrier = Arc::new(Barrier::new(plans.len()));
    let runs: Vec<_> = plans
        .into_iter()
        .map(|(plan, task)| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                datafusion::physical_plan::collect(plan, task).await
            })
        })
        .collect();
    for run in runs {
        assert_eq!(ints_of(&run.await.unwrap().unwrap()), 1000);
    }
    assert_eq!(
        version(&ctx, "t").await,
        v0 + 8,
        "exactly one version per statement"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id) FROM t").await,
        vec![INITIAL + 8000, INITIAL + 8000]
    );
    let appends = ints(
        &ctx,
        &format!(
            "SELECT count(*) FROM lance_versions('t') WHERE version > {v0} AND operation = 'Append'"
        ),
    )
    .await;
    assert_eq!(appends, vec![8]);
}

fn ints_of(batches: &[RecordBatch]) -> i64 {
    let c = cast(batches[0].column(0), &DataType::Int64).unwrap();
    c.as_any().downcast_ref::<Int64Array>().unwrap().value(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_see_only_committed_states_during_20_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(3, &cache);
    let uri = dataset_path(&dir, "t.lance");
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (cache, uri, done) = (Arc::clone(&cache), uri.clone(), Arc::clone(&done));
        tokio::spawn(async move {
            let ctx = context(2, &cache);
            sql(
                &ctx,
                &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
            )
            .await
            .unwrap();
            for k in 0..20 {
                sql(
                    &ctx,
                    &format!(
                        "INSERT INTO t SELECT value FROM generate_series({}, {})",
                        k * 500,
                        k * 500 + 499
                    ),
                )
                .await
                .unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut observed = BTreeSet::new();
    while !done.load(Ordering::SeqCst) {
        let r = ints(
            &ctx,
            "SELECT count(*) AS n, coalesce(sum(id), 0) AS s FROM t WHERE id >= 0",
        )
        .await;
        let (n, s) = (r[0], r[1]);
        assert_eq!(n % 500, 0, "a partial commit: {n} rows");
        assert_eq!(s, n * (n - 1) / 2, "ids 0..{n} exactly once");
        observed.insert(n);
    }
    writer.await.unwrap();
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![10_000]);
    assert!(!observed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insert_overwrite_racing_insert_is_serializable() {
    // Both statements are planned on the same version, then committed in
    // one order or the other.
    for overwrite_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let cache = private_cache();
        let ctx = context(2, &cache);
        let uri = setup(&dir, &ctx).await;
        let v0 = version(&ctx, "t").await;
        let overwrite = planned(
            &cache,
            &uri,
            "INSERT OVERWRITE t SELECT value + 1000, 'o' FROM generate_series(0, 99)",
        )
        .await;
        let insert = planned(
            &cache,
            &uri,
            "INSERT INTO t SELECT value + 2000, 'i' FROM generate_series(0, 99)",
        )
        .await;
        let (first, second) = if overwrite_first {
            (overwrite, insert)
        } else {
            (insert, overwrite)
        };
        datafusion::physical_plan::collect(first.0, first.1)
            .await
            .unwrap();
        let second = datafusion::physical_plan::collect(second.0, second.1).await;
        let rows = ints(
            &ctx,
            "SELECT count(*), count(*) FILTER (WHERE id < 1000), count(*) FILTER (WHERE id >= 2000) FROM t",
        )
        .await;
        if overwrite_first {
            // The INSERT read a version the overwrite replaced: it must not
            // land on the overwritten table.
            let e = second.unwrap_err().to_string();
            assert!(
                e.contains("a concurrent write conflicts with this statement"),
                "{e}"
            );
            assert_eq!(rows, vec![100, 0, 0]);
            assert_eq!(version(&ctx, "t").await, v0 + 1);
        } else {
            // INSERT, then INSERT OVERWRITE: the overwrite replaces both.
            second.unwrap();
            assert_eq!(rows, vec![100, 0, 0]);
            assert_eq!(version(&ctx, "t").await, v0 + 2);
        }
    }
}

/// Every file under the dataset directory (manifests, transactions, data).
fn all_files(dir: &std::path::Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.display().to_string());
            }
        }
    }
    files
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

/// Concurrent DELETE / UPDATE statements from separate contexts: on disjoint
/// fragments both commit (Lance rebases them); on the same rows one may fail
/// with the conflict error, never both applied twice or half applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deletes_and_updates_are_serializable() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(2, &cache);
    let uri = setup(&dir, &ctx).await;
    // Two more fragments: ids 1000..1099 and 2000..2099.
    sql(
        &ctx,
        "INSERT INTO t SELECT value, 'a' FROM generate_series(1000, 1099)",
    )
    .await
    .unwrap();
    sql(
        &ctx,
        "INSERT INTO t SELECT value, 'b' FROM generate_series(2000, 2099)",
    )
    .await
    .unwrap();
    let v0 = version(&ctx, "t").await;

    // Disjoint fragments, both statements in flight at once (both planned
    // on the same version before either commits): the second rebases.
    let (a, b) = (
        planned(&cache, &uri, "DELETE FROM t WHERE id BETWEEN 1000 AND 1049").await,
        planned(&cache, &uri, "UPDATE t SET label = 'B' WHERE id >= 2000").await,
    );
    datafusion::physical_plan::collect(a.0, a.1).await.unwrap();
    datafusion::physical_plan::collect(b.0, b.1).await.unwrap();
    assert_eq!(version(&ctx, "t").await, v0 + 2);
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*), count(DISTINCT id), sum(CASE WHEN label = 'B' THEN 1 ELSE 0 END) FROM t"
        )
        .await,
        vec![INITIAL + 150, INITIAL + 150, 100]
    );

    // The same rows, both statements in flight at once: both are planned
    // (reading the same version) before either commits. The first to commit
    // wins; the other fails with the conflict error and changes nothing.
    for (first, second, label_x) in [
        (
            "UPDATE t SET label = 'x' WHERE id >= 1050 AND id < 1075",
            "DELETE FROM t WHERE id >= 1050 AND id < 1075",
            25,
        ),
        (
            "DELETE FROM t WHERE id >= 1075 AND id < 1100",
            "UPDATE t SET label = 'x' WHERE id >= 1075 AND id < 1100",
            0,
        ),
    ] {
        let before = version(&ctx, "t").await;
        let (a, b) = (
            planned(&cache, &uri, first).await,
            planned(&cache, &uri, second).await,
        );
        datafusion::physical_plan::collect(a.0, a.1)
            .await
            .unwrap_or_else(|e| panic!("{first}: {e}"));
        let err = datafusion::physical_plan::collect(b.0, b.1)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "table 't': a concurrent write conflicts with this statement, which was \
                          not committed; retry it"
            ),
            "{second}: {err}"
        );
        assert_eq!(version(&ctx, "t").await, before + 1, "{first} / {second}");
        let range = if label_x == 25 {
            "1050 AND 1074"
        } else {
            "1075 AND 1099"
        };
        let (rows, labelled) = (
            ints(
                &ctx,
                &format!("SELECT count(*) FROM t WHERE id BETWEEN {range}"),
            )
            .await,
            ints(
                &ctx,
                &format!("SELECT count(*) FROM t WHERE id BETWEEN {range} AND label = 'x'"),
            )
            .await,
        );
        // Only the first statement's effect.
        assert_eq!((rows, labelled), (vec![label_x], vec![label_x]), "{first}");
    }
    validates(&uri).await;
}

/// Creation options reach the dataset: storage version, stable row ids and
/// the per-table fragment size; without options a new table gets the
/// crate's default storage version (2.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creation_options_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "opts.lance");
    let plain_uri = dataset_path(&dir, "plain.lance");
    let ctx = context(1, &private_cache());
    sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.data_storage_version' '2.0', 'lance.enable_stable_row_ids' 'true', \
             'lance.max_rows_per_file' '100')"
        ),
    )
    .await
    .unwrap();
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE plain (id BIGINT) STORED AS LANCE LOCATION '{plain_uri}'"),
    )
    .await
    .unwrap();
    sql(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(0, 249)",
    )
    .await
    .unwrap();

    let ds = DatasetBuilder::from_uri(&uri).load().await.unwrap();
    assert_eq!(ds.manifest().data_storage_format.version.to_string(), "2.0");
    assert!(ds.manifest().uses_stable_row_ids());
    let mut sizes: Vec<usize> = ds
        .get_fragments()
        .iter()
        .map(|f| f.metadata().num_rows().unwrap())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [50, 100, 100], "lance.max_rows_per_file = 100");

    let plain = DatasetBuilder::from_uri(&plain_uri).load().await.unwrap();
    assert_eq!(
        plain.manifest().data_storage_format.version.to_string(),
        "2.1"
    );
    assert!(!plain.manifest().uses_stable_row_ids());
}

/// TRUNCATE reports the rows of the version it replaced: when another
/// process appends between planning and commit, those rows are removed and
/// counted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_counts_the_rows_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    numbers(&uri).await; // 941 rows
    let ctx = context(2, &private_cache());
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let plan = ctx
        .sql("TRUNCATE TABLE t")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    crate::util::append_elsewhere(&uri, 5000, 58);
    let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    assert_eq!(ints_of(&batches), 941 + 58);
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![0]);
    assert_eq!(
        version(&ctx, "t").await,
        4,
        "fixture (2), the append, the truncate"
    );
}
