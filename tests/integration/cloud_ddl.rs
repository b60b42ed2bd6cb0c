//! Index DDL and `ALTER TABLE` on `db://` tables: each statement is one
//! request the service carries out (one version), `EXPLAIN` sends nothing,
//! what the service cannot express is refused before any request, and the
//! plans round-trip through both codecs.

use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use datafusion_lance::LanceLogicalCodec;
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
};

use crate::cloud::{lance_sql_csv, on_worker, physical, setup};
use crate::fake_cloud::{FakeCloud, Fault};
use crate::fixtures;
use crate::support::{context, private_cache, sorted_rows, sql, try_rows};

/// The rows `statement` answers through this crate's front door, sorted.
async fn rows(ctx: &SessionContext, statement: &str) -> Result<Vec<String>, String> {
    sql(ctx, statement)
        .await
        .map(|batches| sorted_rows(&batches))
        .map_err(|e| e.to_string())
}

/// The versions of the fake's table, as Lance sees it.
async fn versions(ctx: &SessionContext) -> String {
    try_rows(ctx, "SELECT count(*) FROM lance_versions('cloud')")
        .await
        .unwrap()
        .join("")
}

/// The indices of the fake's table, read from storage.
async fn local_indices(fake: &FakeCloud) -> Vec<String> {
    let ctx = context(1, &private_cache());
    let path = fake.table_path("numbers");
    try_rows(
        &ctx,
        &format!("SELECT name, columns, type FROM lance_indices('{path}') ORDER BY name"),
    )
    .await
    .unwrap()
}

/// `statement` fails with a message containing `want`, sending no request.
async fn refused(fake: &FakeCloud, ctx: &SessionContext, statement: &str, want: &str) {
    fake.clear_log();
    let err = sql(ctx, statement).await.unwrap_err().to_string();
    assert!(err.contains(want), "{statement}: {err}");
    assert!(
        fake.log()
            .iter()
            .all(|r| !r.contains("index") && !r.contains("columns")),
        "{statement}: {:?}",
        fake.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_ddl_is_one_request_and_explain_sends_none() {
    let (fake, ctx) = setup().await;
    let before = versions(&ctx).await;
    fake.clear_log();
    let plan = rows(&ctx, "EXPLAIN CREATE INDEX s_idx ON cloud USING BITMAP (s)")
        .await
        .unwrap()
        .join("\n");
    assert!(
        plan.contains(
            "CloudDdlExec: table=db://mydb/numbers, create_index=s_idx, column=s, type=BITMAP"
        ),
        "{plan}"
    );
    assert!(
        !fake.log().contains(&"create_table_index"),
        "{:?}",
        fake.log()
    );
    assert_eq!(versions(&ctx).await, before);

    fake.clear_log();
    let out = rows(&ctx, "CREATE INDEX s_idx ON cloud USING BITMAP (s)")
        .await
        .unwrap();
    let after: u64 = before.parse::<u64>().unwrap() + 1;
    assert_eq!(out, vec![format!("s_idx|created|{after}")]);
    assert_eq!(
        fake.log()
            .iter()
            .filter(|r| **r == "create_table_index")
            .count(),
        1,
        "{:?}",
        fake.log()
    );
    assert_eq!(local_indices(&fake).await, vec!["s_idx|s|BITMAP"]);
    // A filter on the indexed column still answers as locally.
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM cloud WHERE s = 'row-7'").await,
        try_rows(&ctx, "SELECT count(*) FROM local WHERE s = 'row-7'").await
    );

    let err = sql(&ctx, "CREATE INDEX s_idx ON cloud USING BITMAP (s)")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("an index of that name exists"), "{err}");
    assert_eq!(
        rows(
            &ctx,
            "CREATE INDEX IF NOT EXISTS s_idx ON cloud USING BITMAP (s)"
        )
        .await
        .unwrap(),
        vec![format!("s_idx|unchanged|{after}")]
    );
    refused(
        &fake,
        &ctx,
        "CREATE INDEX s_idx ON cloud USING BITMAP (s) WITH (replace = true)",
        "not rebuilt in place (WITH (replace = true)); DROP INDEX s_idx ON cloud first",
    )
    .await;
    refused(
        &fake,
        &ctx,
        "CREATE INDEX nope_idx ON cloud (nope)",
        "no column 'nope'",
    )
    .await;

    assert_eq!(
        rows(&ctx, "DROP INDEX s_idx ON cloud").await.unwrap(),
        vec![format!("s_idx|dropped|{}", after + 1)]
    );
    assert!(local_indices(&fake).await.is_empty());
    let err = sql(&ctx, "DROP INDEX s_idx ON cloud")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("the table has no index of that name"), "{err}");
    assert_eq!(
        rows(&ctx, "DROP INDEX IF EXISTS s_idx ON cloud")
            .await
            .unwrap(),
        vec![format!("s_idx|unchanged|{}", after + 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_changes_columns_through_the_service() {
    let (fake, ctx) = setup().await;
    let before: u64 = versions(&ctx).await.parse().unwrap();
    let want = try_rows(
        &ctx,
        "SELECT id, CAST(id * 2 AS INT) FROM local WHERE id < 30 ORDER BY id",
    )
    .await
    .unwrap();

    fake.clear_log();
    let plan = rows(
        &ctx,
        "EXPLAIN ALTER TABLE cloud ADD COLUMN twice INT AS (id * 2)",
    )
    .await
    .unwrap()
    .join("\n");
    assert!(
        plan.contains("add_column=twice, expression=CAST((`id` * 2) AS INT)"),
        "{plan}"
    );
    assert!(fake.log().iter().all(|r| *r != "alter_table_add_columns"));

    assert_eq!(
        rows(&ctx, "ALTER TABLE cloud ADD COLUMN twice INT AS (id * 2)")
            .await
            .unwrap(),
        vec![format!("twice|added|{}", before + 1)]
    );
    // The registration knows the new column at once.
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT id, twice FROM cloud WHERE id < 30 ORDER BY id"
        )
        .await
        .unwrap(),
        want
    );
    assert_eq!(
        rows(&ctx, "ALTER TABLE cloud ADD COLUMN IF NOT EXISTS twice INT")
            .await
            .unwrap(),
        vec![format!("twice|unchanged|{}", before + 1)]
    );
    assert_eq!(
        rows(&ctx, "ALTER TABLE cloud ADD COLUMN note VARCHAR")
            .await
            .unwrap(),
        vec![format!("note|added|{}", before + 2)]
    );
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM cloud WHERE note IS NULL")
            .await
            .unwrap(),
        vec!["941"]
    );
    ok_row(
        &ctx,
        "ALTER TABLE cloud RENAME COLUMN twice TO double_id",
        "twice|renamed",
    )
    .await;
    ok_row(
        &ctx,
        "ALTER TABLE cloud ALTER COLUMN double_id TYPE BIGINT",
        "double_id|retyped",
    )
    .await;
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT min(arrow_typeof(double_id)), sum(double_id) FROM cloud WHERE id < 30"
        )
        .await
        .unwrap(),
        vec![format!(
            "Int64|{}",
            want.iter()
                .map(|r| r.split('|').nth(1).unwrap().parse::<i64>().unwrap())
                .sum::<i64>()
        )]
    );
    ok_row(&ctx, "ALTER TABLE cloud DROP COLUMN note", "note|dropped").await;
    ok_row(
        &ctx,
        "ALTER TABLE cloud DROP COLUMN IF EXISTS note",
        "note|unchanged",
    )
    .await;
    let columns = try_rows(
        &ctx,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'cloud' ORDER BY \
         ordinal_position",
    )
    .await
    .unwrap();
    // (sorted)
    assert_eq!(columns, vec!["b", "d", "double_id", "id", "s", "v"]);
    let now = versions(&ctx).await;

    for (statement, want) in [
        (
            "ALTER TABLE cloud ADD COLUMN e INT DEFAULT 5",
            "DEFAULT is not supported (AS (<constant>) fills the existing rows)",
        ),
        (
            "ALTER TABLE cloud ADD COLUMN e INT NOT NULL AS (1)",
            "column 'e' cannot be added NOT NULL",
        ),
        (
            "ALTER TABLE cloud ALTER COLUMN s SET DEFAULT 'x'",
            "SET / DROP DEFAULT is not supported",
        ),
        (
            "ALTER TABLE cloud ADD COLUMN e VARCHAR AS (upper(s))",
            "has no exact Lance SQL form",
        ),
        (
            "ALTER TABLE cloud RENAME TO other",
            "renaming a LanceDB table (db://) is not supported",
        ),
        ("ALTER TABLE cloud DROP COLUMN nope", "no column 'nope'"),
    ] {
        refused(&fake, &ctx, statement, want).await;
    }
    assert_eq!(versions(&ctx).await, now);
}

/// One row of an `ALTER TABLE`: the column and the action (the version
/// varies).
async fn ok_row(ctx: &SessionContext, statement: &str, want: &str) {
    let got = rows(ctx, statement).await.unwrap();
    assert_eq!(got.len(), 1, "{statement}: {got:?}");
    assert!(
        got[0].starts_with(&format!("{want}|")),
        "{statement}: {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_ddl_plans_round_trip_and_run_on_a_worker() {
    let (fake, ctx) = setup().await;
    let statement = "CREATE INDEX id_idx ON cloud (id) WITH (replace = false)";
    let plan = physical(&ctx, statement).await;
    let (worker, decoded) = on_worker(&plan);
    let out = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(
        sorted_rows(&out)[0].split('|').take(2).collect::<Vec<_>>(),
        ["id_idx", "created"]
    );
    assert_eq!(local_indices(&fake).await, vec!["id_idx|id|BTREE"]);

    // A tag change, decoded and run on the worker.
    let plan = physical(
        &ctx,
        "SELECT * FROM lance_tag('cloud', 'create', 'made_there', 2)",
    )
    .await;
    let (worker, decoded) = on_worker(&plan);
    let out = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(sorted_rows(&out), vec!["made_there|2"]);
    assert_eq!(
        rows(&ctx, "SELECT tag, version FROM lance_tags('cloud')")
            .await
            .unwrap(),
        vec!["made_there|2"]
    );

    // The statement in a logical plan, decoded and run elsewhere.
    let carrying = LanceLogicalCodec::new().with_storage_options_in_plan(true);
    for statement in [
        "ALTER TABLE cloud ADD COLUMN flag BOOLEAN AS (id > 500)",
        "DROP INDEX id_idx ON cloud",
    ] {
        let logical = datafusion_lance::plan_lance_sql(&ctx.state(), statement)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{statement}: not planned here"));
        let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &carrying).unwrap();
        let decoded =
            logical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &carrying)
                .unwrap();
        assert_eq!(format!("{decoded}"), format!("{logical}"));
        worker
            .execute_logical_plan(decoded)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
    }
    assert!(local_indices(&fake).await.is_empty());
    // Changed by the worker: a fresh registration sees the new column.
    let fresh = crate::cloud::opened(&fake, "numbers", ("here", "there"), "").await;
    assert_eq!(
        try_rows(&fresh, "SELECT count(*) FROM there WHERE flag")
            .await
            .unwrap(),
        try_rows(&fresh, "SELECT count(*) FROM here WHERE id > 500")
            .await
            .unwrap()
    );
}

/// What a user types: `lance-sql` with a database attached, DDL among
/// other statements in one `-c`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lance_sql_runs_index_ddl_and_alter_table_on_a_database() {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    let out = lance_sql_csv(
        &fake,
        "db://mydb",
        "CREATE INDEX id_idx ON cloud.public.numbers (id); \
             ALTER TABLE cloud.public.numbers ADD COLUMN big BOOLEAN AS (id >= 900); \
             SELECT count(*) AS n FROM cloud.public.numbers WHERE big; \
             DROP INDEX id_idx ON cloud.public.numbers",
    );
    assert_eq!(
        out,
        "index,action,version\nid_idx,created,3\ncolumn,action,version\nbig,added,4\nn\n94\n\
         index,action,version\nid_idx,dropped,5\n"
    );
}

/// A change whose answer is lost after the service applied it is not sent
/// again, and the error says it may have been applied, naming the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_answer_is_lost_is_sent_once() {
    let (fake, ctx) = setup().await;
    fake.clear_log();
    fake.fail_next("create_table_index", &[Fault::AppliedThenReset]);
    let err = rows(&ctx, "CREATE INDEX s_idx ON cloud USING BITMAP (s)")
        .await
        .unwrap_err();
    fake.settle().await;
    assert!(
        err.contains("create_index 's_idx' on cloud")
            && err.contains("create_index failed after 1 attempt")
            && err.contains("the service may have applied it"),
        "{err}"
    );
    let sent = fake
        .log()
        .iter()
        .filter(|r| **r == "create_table_index")
        .count();
    assert_eq!(sent, 1, "{:?}", fake.log());
    assert_eq!(local_indices(&fake).await, vec!["s_idx|s|BITMAP"]);
}

/// The metric of a vector index reaches the service: the index built over
/// `db://` measures cosine distances (Lance would search a mismatched
/// index by brute force, so equal answers alone would not show it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vector_index_is_built_with_the_metric_asked_for() {
    use lance::index::DatasetIndexExt;
    let fake = FakeCloud::start().await;
    fixtures::docs(&fake.table_path("docs")).await;
    let ctx = crate::cloud::opened(&fake, "docs", ("here", "cloud"), "").await;
    assert_eq!(
        rows(
            &ctx,
            "CREATE INDEX emb_idx ON cloud USING IVF_FLAT (emb) WITH (metric = 'cosine', \
             num_partitions = 1)"
        )
        .await
        .unwrap(),
        vec!["emb_idx|created|3"]
    );
    let dataset = lance::Dataset::open(&fake.table_path("docs"))
        .await
        .unwrap();
    let stats = dataset.index_statistics("emb_idx").await.unwrap();
    assert!(stats.to_lowercase().contains("cosine"), "{stats}");
}
