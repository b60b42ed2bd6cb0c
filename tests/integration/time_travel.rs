//! Time travel in queries (`VERSION AS OF`, `TIMESTAMP AS OF`,
//! `lance_as_of`) where `.slt` files cannot reach: a version with another
//! schema, and exact commit times in a session time zone.

use chrono::FixedOffset;
use datafusion::arrow::array::RecordBatch;
use datafusion_lance::LanceSessionContextExt;
use lance::dataset::NewColumnTransform;

use crate::support::{context, dataset_path, ints, ok, private_cache, sql};

/// A version is read with the columns it had: a column added later is not
/// there, and naming it is an error that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_is_read_with_the_schema_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "versions.lance");
    let mut ds = crate::fixtures::versions(&uri).await; // v1..v4
    ds.add_columns(
        NewColumnTransform::SqlExpressions(vec![("w".into(), "id * 2".into())]),
        None,
        None,
    )
    .await
    .unwrap(); // v5
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;

    let columns = |batches: &[RecordBatch]| -> Vec<String> {
        batches[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    let latest = sql(&ctx, "SELECT * FROM t LIMIT 1").await.unwrap();
    let old = sql(&ctx, "SELECT * FROM t VERSION AS OF 4 LIMIT 1")
        .await
        .unwrap();
    assert!(columns(&latest).contains(&"w".to_string()));
    assert!(!columns(&old).contains(&"w".to_string()));
    assert_eq!(columns(&latest).len(), columns(&old).len() + 1);
    assert_eq!(
        ints(&ctx, "SELECT sum(w) FROM t").await,
        vec![2 * (5..30).sum::<i64>()]
    );

    let err = sql(&ctx, "SELECT w FROM t VERSION AS OF 4")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("No field named w"), "{err}");

    // Both schemas in one statement.
    let rows = sql(
        &ctx,
        "SELECT count(*) FROM t JOIN t VERSION AS OF 2 AS o ON t.id = o.id WHERE t.w = 2 * o.id",
    )
    .await
    .unwrap();
    assert_eq!(crate::support::ints_of(&rows), 15); // ids 5..19
}

/// `TIMESTAMP AS OF` with a time without a zone reads it in the session time
/// zone: version 2's commit time written in +05:30 finds version 2 under
/// that zone, and a version 5 h 30 min later (the latest) under UTC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_without_a_zone_is_in_the_session_time_zone() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "versions.lance");
    let ds = crate::fixtures::versions(&uri).await;
    let versions = ds.versions().await.unwrap();
    let v2 = versions.iter().find(|v| v.version == 2).unwrap();
    let v3 = versions.iter().find(|v| v.version == 3).unwrap();
    assert!(
        v2.timestamp.timestamp_micros() < v3.timestamp.timestamp_micros(),
        "the fixture's versions 2 and 3 were committed in distinct microseconds"
    );
    let india = FixedOffset::east_opt(5 * 3600 + 1800).unwrap();
    let local = v2
        .timestamp
        .with_timezone(&india)
        .naive_local()
        .format("%Y-%m-%d %H:%M:%S%.6f")
        .to_string();

    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let count = format!("SELECT count(*) FROM t TIMESTAMP AS OF '{local}'");
    let count_as_of = |ctx: &datafusion::prelude::SessionContext| {
        let ctx = ctx.clone();
        let count = count.clone();
        async move {
            crate::support::ints_of(
                &ctx.lance_sql(&count)
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(
        count_as_of(&ctx).await,
        25,
        "UTC: 5 h 30 min after every commit"
    );
    ok(&ctx, "SET datafusion.execution.time_zone = '+05:30'").await;
    assert_eq!(count_as_of(&ctx).await, 20, "+05:30: version 2 exactly");
    // One microsecond earlier is version 1.
    let before = (v2.timestamp - chrono::Duration::microseconds(1))
        .with_timezone(&india)
        .naive_local()
        .format("%Y-%m-%d %H:%M:%S%.6f")
        .to_string();
    let rows = sql(
        &ctx,
        &format!("SELECT count(*) FROM lance_as_of('t', TIMESTAMP '{before}')"),
    )
    .await
    .unwrap();
    assert_eq!(crate::support::ints_of(&rows), 10);
}

/// `SessionContext::sql` plans no time travel: the clause and the function
/// are errors saying where they work, never ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_context_sql_rejects_time_travel() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "versions.lance");
    crate::fixtures::versions(&uri).await;
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let err = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            match ctx.sql(sql).await {
                Ok(df) => df.collect().await.map(|_| ()).unwrap_err().to_string(),
                Err(e) => e.to_string(),
            }
        }
    };
    let e = err("SELECT count(*) FROM lance_as_of('t', 1)").await;
    assert!(
        e.contains("lance_as_of(...) is planned by lance-sql"),
        "{e}"
    );
    ok(&ctx, "SET datafusion.sql_parser.dialect = 'databricks'").await;
    let e = err("SELECT count(*) FROM t VERSION AS OF 1").await;
    assert!(
        e.contains("'VERSION AS OF 1' on table 't' is not supported here"),
        "{e}"
    );
    // The same statement through lance_sql reads version 1.
    let rows = sql(&ctx, "SELECT count(*) FROM t VERSION AS OF 1")
        .await
        .unwrap();
    assert_eq!(crate::support::ints_of(&rows), 10);
}

/// Two versions of one table and two calls of one table function stay
/// apart in plans shipped to another process: the logical plan (resolved)
/// and the physical plan, decoded in a context with its own Lance session
/// and no tables, give the answer the statement gives locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_versions_of_a_table_round_trip_through_the_codecs_apart() {
    use datafusion_lance::{LanceLogicalCodec, LancePhysicalCodec, resolve_lance_tables};
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
        physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
    };

    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "versions.lance");
    crate::fixtures::versions(&uri).await;
    let other = dataset_path(&dir, "numbers.lance");
    crate::fixtures::numbers(&other).await;
    let origin = context(2, &private_cache());
    ok(
        &origin,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let statement = format!(
        "SELECT (SELECT count(*) FROM t VERSION AS OF 1) AS a, (SELECT count(*) FROM t) AS b, \
         (SELECT max(id) FROM lance_as_of('t', 2)) AS c, \
         (SELECT count(*) FROM lance_versions('t')) AS d, \
         (SELECT count(*) FROM lance_versions('{other}')) AS e"
    );
    let local = sql(&origin, &statement).await.unwrap();
    assert_eq!(crate::support::sorted_rows(&local), vec!["10|25|19|4|2"]);

    let worker = context(2, &private_cache());
    let state = origin.state();
    let plan = datafusion_lance::plan_lance_sql(&state, &statement)
        .await
        .unwrap()
        .expect("time travel is planned by this crate");
    let plan = resolve_lance_tables(state.optimize(&plan).unwrap(), &state)
        .await
        .unwrap();
    let bytes =
        logical_plan_to_bytes_with_extension_codec(&plan, &LanceLogicalCodec::new()).unwrap();
    let decoded = logical_plan_from_bytes_with_extension_codec(
        &bytes,
        &worker.task_ctx(),
        &LanceLogicalCodec::new(),
    )
    .unwrap();
    let rows = worker
        .execute_logical_plan(decoded)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(crate::support::sorted_rows(&rows), vec!["10|25|19|4|2"]);

    let physical = state.create_physical_plan(&plan).await.unwrap();
    let bytes =
        physical_plan_to_bytes_with_extension_codec(physical, &LancePhysicalCodec::new()).unwrap();
    let decoded = physical_plan_from_bytes_with_extension_codec(
        &bytes,
        &worker.task_ctx(),
        &LancePhysicalCodec::new(),
    )
    .unwrap();
    let rows = datafusion::physical_plan::collect(decoded, worker.task_ctx())
        .await
        .unwrap();
    assert_eq!(crate::support::sorted_rows(&rows), vec!["10|25|19|4|2"]);
}
