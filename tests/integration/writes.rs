//! Writes that succeed: creation options take effect, `TRUNCATE` reports
//! what it removed. (Failures: `write_faults`; concurrent statements:
//! `concurrency`.)

use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use datafusion_lance::LanceSessionContextExt;
use lance::dataset::builder::DatasetBuilder;

use crate::fixtures::numbers;
use crate::support::{context, dataset_path, ints, ints_of, private_cache, sql, version};

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
    crate::support::append_elsewhere(&uri, 5000, 58);
    let batches = collect(plan, ctx.task_ctx()).await.unwrap();
    assert_eq!(ints_of(&batches), 941 + 58);
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![0]);
    assert_eq!(
        version(&ctx, "t").await,
        4,
        "fixture (2), the append, the truncate"
    );
}

/// The metric `name` of the first node called `node` in `plan`.
fn metric(plan: &Arc<dyn ExecutionPlan>, node: &str, name: &str) -> Option<usize> {
    if plan.name() == node {
        return plan.metrics()?.sum_by_name(name).map(|v| v.as_usize());
    }
    plan.children()
        .into_iter()
        .find_map(|child| metric(child, node, name))
}

/// Runs `statement` and returns its physical plan, holding the metrics.
async fn run(ctx: &SessionContext, statement: &str) -> Arc<dyn ExecutionPlan> {
    let plan = ctx
        .lance_sql(statement)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    plan
}

/// Every committing node reports what it did in `EXPLAIN ANALYZE`: rows
/// inserted, updated and deleted, files written, the version it made and
/// the versions other writers committed since the statement read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_nodes_report_their_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "m.lance");
    let ctx = context(2, &private_cache());
    sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT) STORED AS LANCE \
             LOCATION '{uri}' OPTIONS ('lance.max_rows_per_file' '40')"
        ),
    )
    .await
    .unwrap();

    let insert = run(
        &ctx,
        "INSERT INTO t SELECT value AS id, value AS v FROM generate_series(0, 99)",
    )
    .await;
    let commit = |name| metric(&insert, "LanceCommitExec", name);
    assert_eq!(commit("rows_inserted"), Some(100));
    // 100 rows in files of at most 40 rows: at least 3 data files.
    assert!(
        commit("files_written").unwrap() >= 3,
        "{:?}",
        commit("files_written")
    );
    assert_eq!(commit("committed_version"), Some(2));
    assert_eq!(commit("concurrent_commits"), Some(0));
    assert_eq!(commit("commit_attempts"), Some(1));

    let delete = run(&ctx, "DELETE FROM t WHERE id < 10").await;
    let deleted = |name| metric(&delete, "LanceDeleteExec", name);
    assert_eq!(deleted("rows_deleted"), Some(10));
    assert_eq!(deleted("deletion_files_written"), Some(1));
    assert_eq!(deleted("files_written"), Some(0));
    assert_eq!(deleted("committed_version"), Some(3));

    let update = run(&ctx, "UPDATE t SET v = -v WHERE id >= 90").await;
    assert_eq!(metric(&update, "LanceUpdateExec", "rows_updated"), Some(10));
    assert_eq!(
        metric(&update, "LanceUpdateExec", "committed_version"),
        Some(4)
    );

    let merge = run(
        &ctx,
        "MERGE INTO t USING (SELECT value AS id, 0 AS v FROM generate_series(95, 104)) s \
         ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v \
         WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
    )
    .await;
    let merged = |name| metric(&merge, "LanceMergeExec", name);
    assert_eq!(merged("rows_updated"), Some(5));
    assert_eq!(merged("rows_inserted"), Some(5));
    assert_eq!(merged("rows_deleted"), Some(0));
    assert_eq!(merged("committed_version"), Some(5));

    // Planned at version 5; another writer commits version 6 before it runs.
    let planned = ctx
        .lance_sql("INSERT INTO t VALUES (1000, 0)")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    sql(&ctx, "INSERT INTO t VALUES (2000, 0)").await.unwrap();
    collect(Arc::clone(&planned), ctx.task_ctx()).await.unwrap();
    assert_eq!(
        metric(&planned, "LanceCommitExec", "committed_version"),
        Some(7)
    );
    assert_eq!(
        metric(&planned, "LanceCommitExec", "concurrent_commits"),
        Some(1)
    );

    // TRUNCATE reports what it removed.
    let truncate = run(&ctx, "TRUNCATE TABLE t").await;
    assert_eq!(
        metric(&truncate, "LanceCommitExec", "rows_deleted"),
        Some(97)
    );
    assert_eq!(
        metric(&truncate, "LanceCommitExec", "rows_inserted"),
        Some(0)
    );
}
