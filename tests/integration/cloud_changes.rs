//! DELETE and UPDATE on `db://` tables: the same statements on the same
//! rows opened locally leave the same table; each is one request and one
//! version; they are never resent after a failure that may have applied
//! them; their plans round-trip.

use std::sync::Arc;

use datafusion::physical_plan::collect;
use datafusion_lance::{Error, LancePhysicalCodec};
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};

use crate::cloud::{count_of, physical, setup, stored_version, text};
use crate::fake_cloud::Fault;
use crate::fixtures;
use crate::support::{ok, sorted_rows, sql, try_rows};

const STATEMENTS: &[&str] = &[
    "DELETE FROM {t} WHERE id < 10 AND s IS NULL",
    "UPDATE {t} SET v = v * 2 + 1, s = 'changed' WHERE id >= 990",
    "DELETE FROM {t} WHERE id BETWEEN 100 AND 199 OR s LIKE 'Ab%'",
    "UPDATE {t} SET b = NOT b, d = NULL WHERE id IN (300, 301, 302, 5)",
    "UPDATE {t} SET id = id + 100000 WHERE v IS NULL",
    "DELETE FROM {t} WHERE b = false AND id > 800",
    "UPDATE {t} SET s = 'every row'",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_update_leave_what_they_leave_locally() {
    let (fake, ctx) = setup().await;
    let copy = fake.table_path("copy");
    fixtures::numbers(&copy).await;
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE copy STORED AS LANCE LOCATION '{copy}'"),
    )
    .await;
    for statement in STATEMENTS {
        let before: i64 = stored_version(&ctx).await.parse().unwrap();
        fake.clear_log();
        let here = try_rows(&ctx, &statement.replace("{t}", "copy")).await;
        let there = try_rows(&ctx, &statement.replace("{t}", "cloud")).await;
        let here = here.unwrap_or_else(|e| panic!("{statement} (local): {e}"));
        let there = there.unwrap_or_else(|e| panic!("{statement} (db://): {e}"));
        assert_eq!(there, here, "{statement}: rows changed");
        assert_ne!(here, vec!["0"], "{statement} changes nothing");
        let changes: Vec<_> = fake
            .log()
            .into_iter()
            .filter(|k| matches!(*k, "delete_from_table" | "update_table"))
            .collect();
        assert_eq!(changes.len(), 1, "{statement}: {:?}", fake.log());
        assert_eq!(
            stored_version(&ctx).await,
            (before + 1).to_string(),
            "{statement}: one version"
        );
        assert_eq!(
            try_rows(&ctx, "SELECT * FROM cloud ORDER BY id")
                .await
                .unwrap(),
            try_rows(&ctx, "SELECT * FROM copy ORDER BY id")
                .await
                .unwrap(),
            "after {statement}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_may_have_applied_is_never_resent() {
    let (fake, ctx) = setup().await;
    let deletes = || {
        fake.log()
            .iter()
            .filter(|k| **k == "delete_from_table")
            .count()
    };
    // Throttled: refused before anything was done, so sent again.
    fake.fail_next("delete_from_table", &[Fault::Throttled]);
    let out = sql(&ctx, "DELETE FROM cloud WHERE id < 5").await.unwrap();
    assert_eq!(sorted_rows(&out), vec!["5"]);
    assert_eq!(deletes(), 2, "{:?}", fake.log());

    for (fault, left) in [
        (Fault::AppliedThenUnavailable, "0"),
        (Fault::Unavailable, "1"),
    ] {
        fake.clear_log();
        let id: i64 = count_of(&ctx, "SELECT min(id) FROM local")
            .await
            .parse()
            .unwrap();
        fake.fail_next("delete_from_table", &[fault]);
        let err = sql(&ctx, &format!("DELETE FROM cloud WHERE id = {id}"))
            .await
            .unwrap_err();
        match Error::find(&err) {
            Some(Error::Cloud {
                message,
                status: Some(503),
            }) => assert!(
                message.starts_with("DELETE FROM cloud: LanceDB table 'db://mydb/numbers': delete failed after 1 attempt: HTTP 503")
                    && message.contains("may have applied it"),
                "{message}"
            ),
            other => panic!("{other:?} ({err})"),
        }
        assert_eq!(deletes(), 1, "{fault:?}: {:?}", fake.log());
        let query = format!("SELECT count(*) FROM local WHERE id = {id}");
        assert_eq!(count_of(&ctx, &query).await, left, "{fault:?}");
    }

    fake.fail_next("update_table", &[Fault::AppliedThenUnavailable]);
    let err = sql(&ctx, "UPDATE cloud SET s = 'x' WHERE id = 500")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "UPDATE cloud: LanceDB table 'db://mydb/numbers': update failed after 1 attempt"
        ) && err.contains("may have applied it"),
        "{err}"
    );
    assert_eq!(
        count_of(&ctx, "SELECT s FROM local WHERE id = 500").await,
        "x"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_db_change_plan_round_trips_and_runs_on_a_worker() {
    let (fake, ctx) = setup().await;
    let rows = count_of(&ctx, "SELECT count(*) FROM local WHERE id > 990").await;
    for (statement, expected) in [
        (
            "UPDATE cloud SET s = 'it''s', v = v - 1 WHERE id > 990",
            "CloudChangeExec: table=db://mydb/numbers, op=update, predicate=(`id` > 990), \
             set=[v=(`v` - 1.0), s='it''s']",
        ),
        (
            "DELETE FROM cloud WHERE s = 'it''s'",
            "CloudChangeExec: table=db://mydb/numbers, op=delete, predicate=(`s` = 'it''s')",
        ),
    ] {
        let plan = physical(&ctx, statement).await;
        assert!(text(&plan).contains(expected), "{}", text(&plan));
        let codec = LancePhysicalCodec::new().with_storage_options_in_plan(true);
        let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &codec).unwrap();
        let worker = crate::support::context(1, &crate::support::private_cache());
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)
                .unwrap();
        assert_eq!(text(&decoded), text(&plan));
        fake.clear_log();
        let out = collect(decoded, worker.task_ctx()).await.unwrap();
        assert_eq!(sorted_rows(&out), vec![rows.clone()], "{statement}");
    }
    assert_eq!(
        count_of(&ctx, "SELECT count(*) FROM local WHERE id > 990").await,
        "0"
    );
}

fn merges(fake: &crate::fake_cloud::FakeCloud) -> usize {
    fake.log()
        .iter()
        .filter(|k| **k == "merge_insert_into_table")
        .count()
}

/// An upsert of unique keys is resent after any failure (the same table
/// results either way); it goes in bounded requests, one version each,
/// and equals the same merge into the same rows opened locally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_are_resent_on_any_failure_and_match_a_local_merge() {
    let (fake, ctx) = setup().await;
    let copy = fake.table_path("copy");
    fixtures::numbers(&copy).await;
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE copy STORED AS LANCE LOCATION '{copy}'"),
    )
    .await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE m STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("'write_rows_per_request' '100'")
        ),
    )
    .await;
    let merge = |t: &str| {
        format!(
            "SELECT inserted, updated, deleted FROM lance_merge('{t}', \
             (SELECT id * 2 AS id, v, 'merged' AS s FROM copy WHERE id < 150), 'id', \
             'when_matched_if=source.s <> target.s')"
        )
    };
    let before: i64 = stored_version(&ctx).await.parse().unwrap();
    fake.clear_log();
    fake.fail_next(
        "merge_insert_into_table",
        &[
            Fault::Pass,
            Fault::AppliedThenUnavailable,
            Fault::Unavailable,
        ],
    );
    let there = try_rows(&ctx, &merge("m")).await.unwrap();
    // 141 source rows, 100 per request: 2 requests, the second sent 3 times.
    assert_eq!(merges(&fake), 4, "{:?}", fake.log());
    let here = try_rows(&ctx, &merge("copy")).await.unwrap();
    // The resent request found its rows merged already: the counts the
    // service reports then are those of the last attempt, so only the
    // tables are compared.
    assert_ne!(there, vec!["0|0|0"]);
    assert_ne!(here, vec!["0|0|0"]);
    assert_eq!(
        try_rows(&ctx, "SELECT * FROM m ORDER BY id").await.unwrap(),
        try_rows(&ctx, "SELECT * FROM copy ORDER BY id")
            .await
            .unwrap()
    );
    // Two requests that applied, plus the one the lost answer hid.
    assert_eq!(stored_version(&ctx).await, (before + 3).to_string());
    let plan = text(&physical(&ctx, &merge("m")).await);
    assert!(
        plan.contains(
            "CloudMergeExec: table=db://mydb/numbers, on=[id], update_all=true, \
             update_if=(source.`s` <> target.`s`), insert_all=true, rows_per_request=100"
        ),
        "{plan}"
    );

    // Deleting by source must fit in one request: refused before sending.
    fake.clear_log();
    let err = sql(
        &ctx,
        "SELECT * FROM lance_merge('m', (SELECT id FROM copy WHERE id < 150), 'id', \
         'when_not_matched_by_source=delete')",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("merge into m: a merge that deletes the rows the source does not match is sent as one request")
            && err.contains("nothing was sent"),
        "{err}"
    );
    assert_eq!(merges(&fake), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_db_merge_plan_round_trips_and_runs_on_a_worker() {
    let (fake, ctx) = setup().await;
    let plan = physical(
        &ctx,
        "MERGE INTO cloud USING (SELECT id + 50000 AS id, v FROM local WHERE id < 20) AS s \
         ON cloud.id = s.id WHEN NOT MATCHED THEN INSERT *",
    )
    .await;
    let codec = LancePhysicalCodec::new().with_storage_options_in_plan(true);
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &codec).unwrap();
    let worker = crate::support::context(1, &crate::support::private_cache());
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap();
    assert_eq!(text(&decoded), text(&plan));
    assert!(
        text(&plan).contains(
            "CloudMergeExec: table=db://mydb/numbers, on=[id], update_all=false, insert_all=true"
        ),
        "{}",
        text(&plan)
    );
    fake.clear_log();
    let out = collect(decoded, worker.task_ctx()).await.unwrap();
    let expected = count_of(&ctx, "SELECT count(*) FROM local WHERE id < 20").await;
    assert_eq!(
        sorted_rows(&out),
        vec![format!("{expected}|0|0|{}", stored_version(&ctx).await)]
    );
    assert_eq!(merges(&fake), 1);
    assert_eq!(
        count_of(&ctx, "SELECT count(*) FROM local WHERE id >= 50000").await,
        expected
    );
}

/// `CREATE TABLE ... AS` in a LanceDB catalog: `create_table` with the
/// first rows, then inserts, one version each; a failure after the first
/// request says the table was created and what the earlier requests did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_as_a_query_goes_in_bounded_requests() {
    let (fake, ctx) = setup().await;
    let options = std::collections::BTreeMap::from([
        (
            "api_key".to_string(),
            crate::fake_cloud::API_KEY.to_string(),
        ),
        ("host_override".to_string(), fake.url()),
        ("write_rows_per_request".to_string(), "40".to_string()),
    ]);
    datafusion_lance::register_lance_catalog(&ctx, "small", "db://mydb", options)
        .await
        .unwrap();
    fake.clear_log();
    let out = sql(
        &ctx,
        "CREATE TABLE small.public.c AS SELECT * FROM local WHERE id < 100",
    )
    .await
    .unwrap();
    assert_eq!(sorted_rows(&out), vec!["94"]);
    let writes: Vec<_> = fake
        .log()
        .into_iter()
        .filter(|k| matches!(*k, "create_table" | "insert_into_table"))
        .collect();
    assert_eq!(
        writes,
        vec!["create_table", "insert_into_table", "insert_into_table"]
    );
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT max(version) FROM lance_versions('small.public.c')"
        )
        .await
        .unwrap(),
        vec!["3"]
    );
    assert_eq!(
        try_rows(&ctx, "SELECT * FROM small.public.c ORDER BY id")
            .await
            .unwrap(),
        try_rows(&ctx, "SELECT * FROM local WHERE id < 100 ORDER BY id")
            .await
            .unwrap()
    );

    fake.fail_next("insert_into_table", &[Fault::Unavailable]);
    let err = sql(
        &ctx,
        "CREATE TABLE small.public.d AS SELECT * FROM local WHERE id < 100",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(
            "INSERT INTO small.public.d: 40 rows were applied by 1 earlier requests (the first \
             created the table) (versions [1])"
        ),
        "{err}"
    );
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM small.public.d")
            .await
            .unwrap(),
        vec!["40"]
    );
}

/// `numbers` rows 0..50 with `id` as Lance's unenforced primary key.
async fn keyed(uri: &str) {
    use std::collections::HashMap;

    use datafusion::arrow::datatypes::Schema;
    use datafusion::arrow::record_batch::RecordBatch;
    use lance::dataset::WriteMode;

    let batch = fixtures::numbers_batch(0, 50);
    let mut fields: Vec<_> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[0] = fields[0].clone().with_metadata(HashMap::from([
        (
            "lance-schema:unenforced-primary-key".to_string(),
            "true".to_string(),
        ),
        (
            "lance-schema:unenforced-primary-key:position".to_string(),
            "1".to_string(),
        ),
    ]));
    let batch =
        RecordBatch::try_new(Arc::new(Schema::new(fields)), batch.columns().to_vec()).unwrap();
    fixtures::write(uri, vec![batch], fixtures::params(WriteMode::Create, 1000)).await;
}

/// `INSERT OR REPLACE` is a `merge_insert` on the table's primary key (an
/// upsert: one request, one version) and leaves what it leaves locally; a
/// table without a key refuses it before any request. `TRUNCATE` is one
/// `delete` of every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_or_replace_upserts_on_the_key_and_truncate_deletes_every_row() {
    let (fake, ctx) = setup().await;
    fake.clear_log();
    let err = sql(
        &ctx,
        "INSERT OR REPLACE INTO cloud VALUES (1, 1.0, 'x', true, NULL)",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("INSERT OR REPLACE into 'cloud' (db://mydb/numbers) needs a primary key"),
        "{err}"
    );
    assert!(!fake.log().contains(&"merge_insert_into_table"));

    keyed(&fake.table_path("keyed")).await;
    let copy = fake.table_path("keyed_copy");
    keyed(&copy).await;
    let db = crate::cloud::opened(&fake, "keyed", ("keyed_local", "keyed_db"), "").await;
    ok(
        &db,
        &format!("CREATE EXTERNAL TABLE copy STORED AS LANCE LOCATION '{copy}'"),
    )
    .await;
    let replace = |t: &str| {
        format!(
            "INSERT OR REPLACE INTO {t} SELECT id * 2, v, 'replaced', b, d FROM copy \
             WHERE id < 40"
        )
    };
    fake.clear_log();
    let there = try_rows(&db, &replace("keyed_db")).await.unwrap();
    assert_eq!(
        fake.log()
            .iter()
            .filter(|k| **k == "merge_insert_into_table")
            .count(),
        1
    );
    let plan = text(&physical(&db, &replace("keyed_db")).await);
    assert!(
        plan.contains("CloudMergeExec: table=db://mydb/keyed, on=[id], update_all=true"),
        "{plan}"
    );
    let here = try_rows(&db, &replace("copy")).await.unwrap();
    assert_eq!(there, here);
    assert_eq!(
        try_rows(&db, "SELECT * FROM keyed_db").await.unwrap(),
        try_rows(&db, "SELECT * FROM copy").await.unwrap()
    );

    let rows = count_of(&ctx, "SELECT count(*) FROM local").await;
    let before: i64 = stored_version(&ctx).await.parse().unwrap();
    fake.clear_log();
    assert_eq!(count_of(&ctx, "TRUNCATE TABLE cloud").await, rows);
    assert_eq!(
        fake.log()
            .iter()
            .filter(|k| **k == "delete_from_table")
            .count(),
        1
    );
    assert_eq!(count_of(&ctx, "SELECT count(*) FROM cloud").await, "0");
    assert_eq!(stored_version(&ctx).await, (before + 1).to_string());
}

/// DELETE, UPDATE and merges on a `db://` table travel in logical plans
/// (the statement, its target and its input) and run where they arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_statements_round_trip_through_the_logical_codec() {
    use datafusion_lance::{LanceLogicalCodec, LanceSessionContextExt};
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    };

    let (_fake, ctx) = setup().await;
    let worker = crate::support::context(1, &crate::support::private_cache());
    let codec = LanceLogicalCodec::new().with_storage_options_in_plan(true);
    // (statement, the count it answers first, a query it leaves answering 0)
    for (statement, expected, after) in [
        (
            "DELETE FROM cloud WHERE id < 20",
            "SELECT count(*) FROM local WHERE id < 20",
            "SELECT count(*) FROM local WHERE id < 20",
        ),
        (
            "UPDATE cloud SET s = 'moved' WHERE id >= 990",
            "SELECT count(*) FROM local WHERE id >= 990",
            "SELECT count(*) FROM local WHERE id >= 990 AND s <> 'moved'",
        ),
        (
            "MERGE INTO cloud AS t USING \
             (SELECT id + 5000 AS id, v, s, b, d FROM local WHERE id < 100) AS s \
             ON t.id = s.id WHEN NOT MATCHED THEN INSERT *",
            "SELECT count(*) FROM local WHERE id < 100",
            "SELECT count(*) FROM local l WHERE id < 100 \
             AND NOT EXISTS (SELECT 1 FROM local m WHERE m.id = l.id + 5000)",
        ),
    ] {
        let want = count_of(&ctx, expected).await;
        let plan = ctx
            .lance_sql(statement)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
        let bare =
            logical_plan_to_bytes_with_extension_codec(&plan, &LanceLogicalCodec::new()).unwrap();
        assert!(!String::from_utf8_lossy(&bare).contains("sk-fake"));
        let decoded =
            logical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)
                .unwrap();
        let out = worker
            .execute_logical_plan(decoded)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        // The count (DELETE, UPDATE) or the rows inserted (MERGE: inserted,
        // updated, deleted, version).
        let rows = sorted_rows(&out);
        assert_eq!(rows.len(), 1, "{statement}");
        assert_eq!(
            rows[0].split('|').next(),
            Some(want.as_str()),
            "{statement}"
        );
        assert_eq!(count_of(&ctx, after).await, "0", "{statement}");
    }
}
