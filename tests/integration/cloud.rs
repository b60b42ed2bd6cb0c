//! LanceDB Cloud tables (`db://`) against the fake service of
//! `tests/common/fake_cloud.rs`: reads equal the same table opened locally,
//! filters travel only when exact, `count(*)` is one request, keys stay
//! secret, failures are retried by class and named, plans round-trip.

use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::SessionContext;
use datafusion_lance::{Error, LanceLogicalCodec, LancePhysicalCodec};
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};

use crate::fake_cloud::{API_KEY, FakeCloud, Fault};
use crate::fixtures;
use crate::support::{context, ok, private_cache, sorted_rows, sql, try_rows};

/// The fake with the `numbers` fixture as table `numbers`, and a context
/// with it as `local` (opened from storage) and `cloud` (through the fake,
/// 128 rows per request, 3 partitions).
pub(crate) async fn setup() -> (FakeCloud, SessionContext) {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    let ctx = opened(
        &fake,
        "numbers",
        ("local", "cloud"),
        "'read_rows_per_request' '128'",
    )
    .await;
    (fake, ctx)
}

/// A context (3 partitions) with the fake's table `table` as `local`
/// (opened from storage) and as `cloud` (through the fake, with `extra`
/// options).
pub(crate) async fn opened(
    fake: &FakeCloud,
    table: &str,
    (local, cloud): (&str, &str),
    extra: &str,
) -> SessionContext {
    let ctx = context(3, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE {local} STORED AS LANCE LOCATION '{}'",
            fake.table_path(table)
        ),
    )
    .await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE {cloud} STORED AS LANCE LOCATION 'db://mydb/{table}' \
             OPTIONS ({})",
            fake.options(extra)
        ),
    )
    .await;
    ctx
}

pub(crate) async fn physical(ctx: &SessionContext, query: &str) -> Arc<dyn ExecutionPlan> {
    datafusion_lance::LanceSessionContextExt::lance_sql(ctx, query)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

pub(crate) fn text(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

/// `plan` encoded without the key (checked), decoded on a fresh worker
/// whose codec holds the fake's key, as a cluster's workers would; shown
/// alike. The worker and the decoded plan.
pub(crate) fn on_worker(plan: &Arc<dyn ExecutionPlan>) -> (SessionContext, Arc<dyn ExecutionPlan>) {
    let bytes =
        physical_plan_to_bytes_with_extension_codec(Arc::clone(plan), &LancePhysicalCodec::new())
            .unwrap();
    assert!(!contains(&bytes, API_KEY.as_bytes()));
    let worker = context(2, &private_cache());
    let codec = LancePhysicalCodec::new()
        .with_default_storage_options([("api_key".to_string(), API_KEY.to_string())]);
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap();
    assert_eq!(text(&decoded), text(plan));
    (worker, decoded)
}

/// What a user types: `lance-sql -q --format csv --catalog cloud=ROOT -c
/// SCRIPT`, the key and the service from the environment. Its standard
/// output; it must succeed and never print the key.
pub(crate) fn lance_sql_csv(fake: &FakeCloud, root: &str, script: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .args([
            "-q",
            "--format",
            "csv",
            "--catalog",
            &format!("cloud={root}"),
            "-c",
            script,
        ])
        .env("LANCEDB_API_KEY", API_KEY)
        .env("LANCEDB_HOST_OVERRIDE", fake.url())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(API_KEY));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Queries whose answers must not depend on where the table is read from.
pub(crate) const CORPUS: &[&str] = &[
    "SELECT * FROM {t}",
    "SELECT id, s FROM {t} WHERE id > 900",
    "SELECT id FROM {t} WHERE id BETWEEN 10 AND 40",
    "SELECT id, s FROM {t} WHERE s = 'it''s 9'",
    "SELECT id FROM {t} WHERE s LIKE 'Ab1%'",
    "SELECT id FROM {t} WHERE s LIKE '50\\%%'",
    "SELECT id FROM {t} WHERE s NOT LIKE 'row-%' AND id < 100",
    "SELECT id FROM {t} WHERE id IN (1, 2, 3, 500, 5)",
    "SELECT id FROM {t} WHERE id NOT IN (1, 2, 3) AND id < 10",
    "SELECT id FROM {t} WHERE v IS NULL",
    "SELECT id FROM {t} WHERE s IS NOT NULL AND b",
    "SELECT id FROM {t} WHERE NOT (id < 990)",
    "SELECT id, v FROM {t} WHERE v > 100.5",
    "SELECT id, v FROM {t} WHERE v < 0.0",
    "SELECT id FROM {t} WHERE b = false OR id = 3",
    "SELECT id FROM {t} WHERE id % 7 = 0 AND id < 200",
    "SELECT id FROM {t} WHERE lower(s) = 'ab4'",
    "SELECT id, d FROM {t} WHERE d IS NOT NULL AND id < 50",
    "SELECT count(*) FROM {t}",
    "SELECT count(*), sum(id) FROM {t} WHERE id > 500",
    "SELECT b, count(*), min(id) FROM {t} GROUP BY b",
    "SELECT id FROM {t} ORDER BY id DESC LIMIT 7",
    "SELECT count(*) FROM (SELECT * FROM {t} WHERE id > 100 LIMIT 5)",
    "SELECT count(*) FROM (SELECT id FROM {t} LIMIT 300)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_db_table_reads_like_the_same_table_opened_locally() {
    let (_fake, ctx) = setup().await;
    for query in CORPUS {
        let local = try_rows(&ctx, &query.replace("{t}", "local")).await;
        let cloud = try_rows(&ctx, &query.replace("{t}", "cloud")).await;
        let local = local.unwrap_or_else(|e| panic!("{query} (local): {e}"));
        let cloud = cloud.unwrap_or_else(|e| panic!("{query} (cloud): {e}"));
        assert!(!local.is_empty(), "{query}: selects nothing");
        assert_eq!(cloud, local, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_filters_travel_as_lance_sql_and_others_stay() {
    let (_fake, ctx) = setup().await;
    let pushed = text(
        &physical(
            &ctx,
            "SELECT id FROM cloud WHERE id > 900 AND s = 'it''s 9'",
        )
        .await,
    );
    assert!(
        pushed.contains("CloudScanExec: table=db://mydb/numbers, version=")
            && pushed.contains("filter=(`id` > 900) AND (`s` = 'it''s 9')")
            && !pushed.contains("FilterExec"),
        "{pushed}"
    );
    // A function, a float compared with zero, a backslash: DataFusion's.
    for query in [
        "SELECT id FROM cloud WHERE lower(s) = 'ab4'",
        "SELECT id FROM cloud WHERE v < 0.0",
        "SELECT id FROM cloud WHERE s LIKE '50\\%%'",
    ] {
        let plan = text(&physical(&ctx, query).await);
        assert!(
            plan.contains("FilterExec") && !plan.contains("filter="),
            "{query}:\n{plan}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_is_one_request_and_reads_page_by_partition() {
    let (fake, ctx) = setup().await;
    let want = sorted_rows(&sql(&ctx, "SELECT count(*) FROM local").await.unwrap());
    fake.clear_log();
    let got = sorted_rows(&sql(&ctx, "SELECT count(*) FROM cloud").await.unwrap());
    assert_eq!(got, want);
    assert_eq!(fake.log(), vec!["describe_table", "count_table_rows"]);

    fake.clear_log();
    let rows = sql(&ctx, "SELECT * FROM cloud").await.unwrap();
    let n: usize = rows.iter().map(|b| b.num_rows()).sum();
    assert_eq!(vec![n.to_string()], want);
    // 3 partitions of ~314 rows, 128 rows per request: 3 requests each.
    let queries = fake.log().iter().filter(|k| **k == "query_table").count();
    assert_eq!(queries, 9, "{:?}", fake.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_or_a_missing_table_is_named_and_the_key_never_shown() {
    let (fake, ctx) = setup().await;
    let err = sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE bad STORED AS LANCE LOCATION 'db://mydb/numbers' \
             OPTIONS ('api_key' 'sk-wrong-secret', 'host_override' '{}')",
            fake.url()
        ),
    )
    .await
    .unwrap_err();
    match Error::find(&err) {
        Some(Error::Cloud {
            message,
            status: Some(401),
        }) => assert!(
            message.contains("'db://mydb/numbers': describe failed after 1 attempt: HTTP 401"),
            "{message}"
        ),
        other => panic!("{other:?} ({err})"),
    }
    assert!(!err.to_string().contains("sk-wrong-secret"), "{err}");

    let err = sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE nope STORED AS LANCE LOCATION 'db://mydb/nope' OPTIONS ({})",
            fake.options("")
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(Error::find(&err), Some(Error::NotFound { message }) if message.contains("'db://mydb/nope'")),
        "{err}"
    );

    let plan = sql(&ctx, "EXPLAIN VERBOSE SELECT * FROM cloud WHERE id > 3")
        .await
        .unwrap();
    let shown = sorted_rows(&plan).join("\n");
    assert!(shown.contains("CloudScanExec") && !shown.contains(API_KEY));

    let err = sql(
        &ctx,
        "CREATE EXTERNAL TABLE o STORED AS LANCE LOCATION 'db://mydb/numbers' \
         OPTIONS ('apikey' 'x')",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("unknown option 'apikey' for a LanceDB table (db://); known: api_key"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_retry_outages_and_give_up_by_name() {
    let (fake, ctx) = setup().await;
    let want = try_rows(&ctx, "SELECT id FROM local WHERE id < 100").await;
    fake.fail_next("query_table", &[Fault::Unavailable, Fault::Throttled]);
    fake.fail_next("count_table_rows", &[Fault::Unavailable]);
    let got = try_rows(&ctx, "SELECT id FROM cloud WHERE id < 100").await;
    assert_eq!(got, want);

    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE once STORED AS LANCE LOCATION 'db://mydb/numbers' \
             OPTIONS ({})",
            fake.options("'max_retries' '0'")
        ),
    )
    .await;
    fake.fail_next("query_table", &[Fault::Unavailable]);
    let err = sql(&ctx, "SELECT id FROM once WHERE id < 100")
        .await
        .unwrap_err();
    match Error::find(&err) {
        Some(Error::Cloud {
            message,
            status: Some(503),
        }) => assert!(
            message.contains("'db://mydb/numbers': query failed after 1 attempt: HTTP 503"),
            "{message}"
        ),
        other => panic!("{other:?} ({err})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_plans_round_trip_and_carry_the_key_only_when_asked() {
    let (_fake, ctx) = setup().await;
    let query = "SELECT id, s FROM cloud WHERE id > 900";
    let want = try_rows(&ctx, query).await.unwrap();

    let plan = physical(&ctx, query).await;
    let bytes =
        physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &LancePhysicalCodec::new())
            .unwrap();
    assert!(!contains(&bytes, API_KEY.as_bytes()));
    let worker = context(2, &private_cache());
    let codec = LancePhysicalCodec::new()
        .with_default_storage_options([("api_key".to_string(), API_KEY.to_string())]);
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap();
    assert_eq!(text(&decoded), text(&plan));
    let got = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(sorted_rows(&got), want);

    if std::env::var("LANCEDB_API_KEY").is_err() {
        let keyless = physical_plan_from_bytes_with_extension_codec(
            &bytes,
            &worker.task_ctx(),
            &LancePhysicalCodec::new(),
        )
        .unwrap();
        let err = collect(keyless, worker.task_ctx()).await.unwrap_err();
        assert!(err.to_string().contains("no API key"), "{err}");
    }

    let logical = ctx.sql(query).await.unwrap().into_optimized_plan().unwrap();
    let hidden =
        logical_plan_to_bytes_with_extension_codec(&logical, &LanceLogicalCodec::new()).unwrap();
    assert!(!contains(&hidden, API_KEY.as_bytes()));
    let carrying = LanceLogicalCodec::new().with_storage_options_in_plan(true);
    let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &carrying).unwrap();
    let decoded =
        logical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &carrying)
            .unwrap();
    let got = worker
        .execute_logical_plan(decoded)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(sorted_rows(&got), want);
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `SELECT max(version) FROM lance_versions('local')`: the fake's table as
/// Lance sees it.
pub(crate) async fn stored_version(ctx: &SessionContext) -> String {
    try_rows(ctx, "SELECT max(version) FROM lance_versions('local')")
        .await
        .unwrap()
        .join("")
}

pub(crate) async fn count_of(ctx: &SessionContext, query: &str) -> String {
    try_rows(ctx, query).await.unwrap().join("")
}

fn inserts(fake: &FakeCloud) -> usize {
    fake.log()
        .iter()
        .filter(|k| **k == "insert_into_table")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_go_in_bounded_requests_and_read_back() {
    let (fake, ctx) = setup().await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE w STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("'write_rows_per_request' '40'")
        ),
    )
    .await;
    assert_eq!(stored_version(&ctx).await, "2");
    fake.clear_log();
    let out = sql(
        &ctx,
        "INSERT INTO w SELECT id + 1000, v, s, b, d FROM local WHERE id < 100",
    )
    .await
    .unwrap();
    assert_eq!(sorted_rows(&out), vec!["94"]);
    // 94 rows, 40 per request: 3 requests, 3 versions.
    assert_eq!(inserts(&fake), 3, "{:?}", fake.log());
    assert_eq!(stored_version(&ctx).await, "5");
    assert_eq!(
        count_of(&ctx, "SELECT count(*), sum(id) FROM w WHERE id >= 1000").await,
        format!("94|{}", 4665 + 94 * 1000)
    );
    assert_eq!(
        try_rows(&ctx, "SELECT * FROM w").await.unwrap(),
        try_rows(&ctx, "SELECT * FROM local").await.unwrap()
    );
    let plan = text(&physical(&ctx, "INSERT INTO w SELECT * FROM local").await);
    assert!(
        plan.contains("CloudWriteExec: table=db://mydb/numbers, mode=append, rows_per_request=40"),
        "{plan}"
    );
}

/// Appends are retried only when the service proves it did nothing (429,
/// a refused connection); any other failure is reported as possibly
/// applied, never sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_is_never_sent_twice() {
    let (fake, ctx) = setup().await;
    let row =
        |id: i64| format!("INSERT INTO cloud VALUES ({id}, 1.0, 'x', true, DATE '2020-01-01')");
    let count = |id: i64| format!("SELECT count(*) FROM local WHERE id = {id}");

    fake.fail_next("insert_into_table", &[Fault::Throttled]);
    ok(&ctx, &row(5000)).await;
    assert_eq!(count_of(&ctx, &count(5000)).await, "1");

    for (id, fault, applied) in [
        (6000, Fault::AppliedThenUnavailable, "1"),
        (7000, Fault::Unavailable, "0"),
    ] {
        fake.clear_log();
        fake.fail_next("insert_into_table", &[fault]);
        let err = sql(&ctx, &row(id)).await.unwrap_err();
        match Error::find(&err) {
            Some(Error::Cloud {
                message,
                status: Some(503),
            }) => assert!(
                message.contains("'db://mydb/numbers': insert failed after 1 attempt: HTTP 503")
                    && message.contains("may have applied it"),
                "{message}"
            ),
            other => panic!("{other:?} ({err})"),
        }
        assert_eq!(inserts(&fake), 1, "{fault:?}: {:?}", fake.log());
        assert_eq!(count_of(&ctx, &count(id)).await, applied, "{fault:?}");
    }

    // A failure after earlier requests of the statement says what they applied.
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE w STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("'write_rows_per_request' '40'")
        ),
    )
    .await;
    let version: i64 = stored_version(&ctx).await.parse().unwrap();
    fake.fail_next("insert_into_table", &[Fault::Pass, Fault::Unavailable]);
    let err = sql(
        &ctx,
        "INSERT INTO w SELECT id + 10000, v, s, b, d FROM local WHERE id < 100",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!(
            "INSERT INTO w: 40 rows were applied by 1 earlier requests (versions [{}])",
            version + 1
        )) && err.contains("insert failed after 1 attempt: HTTP 503"),
        "{err}"
    );
    assert_eq!(
        count_of(&ctx, "SELECT count(*) FROM local WHERE id >= 10000").await,
        "40"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_is_one_request_or_nothing() {
    let (fake, ctx) = setup().await;
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE o STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("'write_rows_per_request' '50'")
        ),
    )
    .await;
    fake.clear_log();
    let err = sql(&ctx, "INSERT OVERWRITE o SELECT * FROM local")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("INSERT OVERWRITE o: the rows do not fit in one request")
            && err.contains("nothing was sent"),
        "{err}"
    );
    assert_eq!(inserts(&fake), 0);
    assert_eq!(count_of(&ctx, "SELECT count(*) FROM local").await, "941");

    let out = sql(&ctx, "INSERT OVERWRITE o SELECT * FROM local WHERE id < 40")
        .await
        .unwrap();
    assert_eq!(sorted_rows(&out), vec!["37"]);
    assert_eq!(inserts(&fake), 1);
    assert_eq!(count_of(&ctx, "SELECT count(*) FROM local").await, "37");
    assert_eq!(count_of(&ctx, "SELECT count(*) FROM o").await, "37");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_db_insert_plan_round_trips_and_runs_on_a_worker() {
    let (_fake, ctx) = setup().await;
    let plan = physical(
        &ctx,
        "INSERT INTO cloud SELECT id + 3000, v, s, b, d FROM local WHERE id < 10",
    )
    .await;
    let (worker, decoded) = on_worker(&plan);
    let out = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(sorted_rows(&out), vec!["9"]);
    assert_eq!(
        count_of(&ctx, "SELECT count(*) FROM cloud WHERE id >= 3000").await,
        "9"
    );
}
