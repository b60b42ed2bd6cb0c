//! `ALTER TABLE` beyond what the `.slt` files show: every change
//! round-trips through both codecs (the decoded logical plan runs on another
//! context), and a plan pinned before a change reads its version's schema.

use std::sync::Arc;

use datafusion::physical_plan::collect;
use datafusion_lance::physical_plan::LanceAlterExec;
use datafusion_lance::{
    LanceLogicalCodec, LancePhysicalCodec, LanceSessionContextExt, plan_lance_sql,
    resolve_lance_tables,
};
use datafusion_proto::bytes::{
    logical_plan_to_bytes_with_extension_codec, physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};

use datafusion_lance::LanceTableProvider;
use lance::dataset::WriteMode;

use crate::fixtures::{numbers_batch, params, write};
use crate::support::faults::FaultInjector;
use crate::support::{
    append_elsewhere, context, dataset_path, ints, private_cache, run_decoded, sorted_rows, sql,
};

/// `t` at `dir`/t.lance with ids 1..=n, a price and a name.
async fn table(ctx: &datafusion::prelude::SessionContext, uri: &str, n: i64) {
    for statement in [
        format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, price DOUBLE, name VARCHAR) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
        format!(
            "INSERT INTO t SELECT value, value * 1.5, 'n' || CAST(value AS VARCHAR) \
             FROM generate_series(1, {n})"
        ),
    ] {
        sql(ctx, &statement).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schema_change_round_trips_through_both_codecs() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let (origin, worker) = (context(2, &private_cache()), context(2, &private_cache()));
    table(&origin, &uri, 10).await;
    let state = origin.state();
    for statement in [
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS note VARCHAR",
        "ALTER TABLE t ADD COLUMN qty INT NOT NULL DEFAULT 7",
        "ALTER TABLE t ADD COLUMN total DOUBLE AS (price * 2 + id)",
        "ALTER TABLE t DROP COLUMN IF EXISTS name",
        "ALTER TABLE t RENAME COLUMN name TO label",
        "ALTER TABLE t ALTER COLUMN price TYPE FLOAT",
        "ALTER TABLE t ALTER COLUMN id DROP NOT NULL",
        "ALTER TABLE t ALTER COLUMN price SET DEFAULT 2.5",
        "ALTER TABLE t ALTER COLUMN price DROP DEFAULT",
    ] {
        let plan = plan_lance_sql(&state, statement)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{statement}: not planned as ALTER TABLE"));
        let physical = state.create_physical_plan(&plan).await.unwrap();
        let codec = LancePhysicalCodec::new();
        let bytes =
            physical_plan_to_bytes_with_extension_codec(Arc::clone(&physical), &codec).unwrap();
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)
                .unwrap();
        let work = |p: &Arc<dyn datafusion::physical_plan::ExecutionPlan>| {
            // Under DataFusion's CooperativeExec.
            let node = p
                .downcast_ref::<LanceAlterExec>()
                .or_else(|| p.children().first()?.downcast_ref::<LanceAlterExec>())
                .unwrap_or_else(|| panic!("{statement}: {p:?}"));
            (node.location().clone(), node.work().clone())
        };
        assert_eq!(work(&decoded), work(&physical), "{statement}");
    }

    // The logical plan of a computed column, decoded and run by the worker
    // (no tables registered there): one version, the values DataFusion computes.
    let versions = "SELECT max(version) FROM lance_versions('t')";
    let before = ints(&origin, versions).await;
    let plan = plan_lance_sql(
        &state,
        "ALTER TABLE t ADD COLUMN total DOUBLE AS (price * 2 + id)",
    )
    .await
    .unwrap()
    .unwrap();
    let plan = resolve_lance_tables(state.optimize(&plan).unwrap(), &state)
        .await
        .unwrap();
    let codec = LanceLogicalCodec::new();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let report = run_decoded(&worker, &bytes).await.unwrap();
    assert_eq!(sorted_rows(&report).len(), 1, "one report row: {report:?}");
    assert_eq!(ints(&origin, versions).await, [before[0] + 1]);
    // The origin's registered table predates the column: read it afresh.
    let fresh = context(2, &private_cache());
    sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let wrong = sql(
        &fresh,
        "SELECT count(*) FROM t WHERE total IS DISTINCT FROM price * 2 + id",
    )
    .await
    .unwrap();
    assert_eq!(sorted_rows(&wrong), ["0"]);
}

/// A statement planned before `ALTER TABLE ... DROP COLUMN` reads its
/// version, dropped column included; the next statement sees the new schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_made_before_a_change_reads_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    table(&ctx, &uri, 5).await;
    let pinned = ctx
        .lance_sql("SELECT id, name FROM t")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    sql(&ctx, "ALTER TABLE t DROP COLUMN name").await.unwrap();
    let rows = sorted_rows(&collect(pinned, ctx.task_ctx()).await.unwrap());
    assert_eq!(rows, ["1|n1", "2|n2", "3|n3", "4|n4", "5|n5"]);
    let err = sql(&ctx, "SELECT name FROM t")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("name"), "{err}");
    let columns = sql(&ctx, "SELECT * FROM t WHERE id = 1").await.unwrap();
    assert_eq!(columns[0].num_columns(), 2);
}

/// Another writer appends just before `ALTER TABLE ... ADD COLUMN ... AS`
/// commits (a store hook runs it then): nothing is lost — the change fails
/// naming the column and saying to retry, and changes nothing; run again, it
/// covers every row, the appended ones included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_append_during_an_add_column_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 400)],
        params(WriteMode::Create, 100),
    )
    .await;
    let faults = FaultInjector::new();
    let ctx = context(2, &private_cache());
    let provider = LanceTableProvider::builder(&uri)
        .with_name("t")
        .with_store_params(faults.params())
        .build()
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(provider)).unwrap();
    let other = uri.clone();
    faults.before_call("put", ".manifest", 1, None, 1, move || {
        append_elsewhere(&other, 1000, 10)
    });
    let alter = "ALTER TABLE t ADD COLUMN twice BIGINT AS (id * 2)";
    let first = sql(&ctx, alter).await;
    assert_eq!(
        faults.hooks_run(),
        1,
        "the other writer committed meanwhile"
    );
    // A fresh registration reads the latest schema.
    let fresh = context(2, &private_cache());
    sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    // Lance 14 cannot rebase the new column over fragments appended
    // meanwhile: the change fails as a retryable conflict, changing nothing.
    let message = first.expect_err("the ALTER raced an append").to_string();
    assert!(
        message.contains("'twice'") && message.contains("retry"),
        "{message}"
    );
    assert_eq!(ints(&fresh, "SELECT count(*) FROM t").await, [410]);
    assert!(sql(&fresh, "SELECT twice FROM t").await.is_err());
    // Run again, it covers every row, the appended ones included.
    sql(&ctx, alter).await.unwrap();
    sql(&fresh, "DROP TABLE t").await.unwrap();
    sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    assert_eq!(
        ints(
            &fresh,
            "SELECT count(*), count(DISTINCT id), sum(CASE WHEN twice = id * 2 THEN 1 ELSE 0 END) FROM t"
        )
        .await,
        [410, 410, 410]
    );
}
