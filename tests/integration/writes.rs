//! Writes that succeed: creation options take effect, `TRUNCATE` reports
//! what it removed. (Failures: `write_faults`; concurrent statements:
//! `concurrency`.)

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
