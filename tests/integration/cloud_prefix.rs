//! Database prefixes of LanceDB Enterprise (`db://DATABASE/PREFIX`): every
//! request names the prefix (`x-lancedb-database-prefix`), from a catalog,
//! from a table's options, from `lance-sql --catalog`, and from a plan
//! decoded on a worker. The fake serves one prefix and answers HTTP 404 to
//! requests without it, so a request that forgot it fails the test.

use std::collections::BTreeMap;

use datafusion::physical_plan::{collect, displayable};
use datafusion_lance::register_lance_catalog;

use crate::cloud::{lance_sql_csv, on_worker, physical};
use crate::fake_cloud::{API_KEY, FakeCloud};
use crate::fixtures;
use crate::support::{context, ok, private_cache, sorted_rows, sql, try_rows};

fn options(fake: &FakeCloud) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("api_key".to_string(), API_KEY.to_string()),
        ("host_override".to_string(), fake.url()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_with_a_prefix_sends_it_with_every_request() {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    fake.serve_prefix(Some("team-a"));
    let ctx = context(2, &private_cache());

    // Without the prefix the service knows no such database.
    let err = register_lance_catalog(&ctx, "bare", "db://mydb", options(&fake))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("'db://mydb': listing tables failed"), "{err}");

    register_lance_catalog(&ctx, "team", "db://mydb/team-a", options(&fake))
        .await
        .unwrap();
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'team' \
             AND table_schema = 'public'"
        )
        .await
        .unwrap(),
        vec!["numbers"]
    );
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT count(*), sum(id) FROM team.public.numbers WHERE id >= 500"
        )
        .await
        .unwrap(),
        vec!["471|352913"]
    );
    // Writes, searches of versions and DDL name it too.
    ok(
        &ctx,
        "CREATE TABLE team.public.copy AS SELECT id, s FROM team.public.numbers WHERE id < 10",
    )
    .await;
    ok(&ctx, "INSERT INTO team.public.copy VALUES (100, 'x')").await;
    ok(&ctx, "DELETE FROM team.public.copy WHERE id = 0").await;
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT count(*), max(version) FROM lance_versions('team.public.copy')"
        )
        .await
        .unwrap(),
        vec!["3|3"]
    );
    assert_eq!(
        try_rows(&ctx, "SELECT count(*), sum(id) FROM team.public.copy")
            .await
            .unwrap(),
        vec!["9|140"]
    );
    let plan = try_rows(&ctx, "EXPLAIN SELECT id FROM team.public.copy")
        .await
        .unwrap()
        .join("\n");
    assert!(
        plan.contains("table=db://mydb/copy (prefix team-a)"),
        "{plan}"
    );
    // Index, column and tag changes name it too.
    ok(&ctx, "CREATE INDEX id_idx ON team.public.copy (id)").await;
    ok(
        &ctx,
        "ALTER TABLE team.public.copy ADD COLUMN twice BIGINT AS (id * 2)",
    )
    .await;
    ok(
        &ctx,
        "SELECT * FROM lance_tag('team.public.copy', 'create', 'v1')",
    )
    .await;
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT sum(twice), (SELECT count(*) FROM lance_tags('team.public.copy')) \
             FROM team.public.copy"
        )
        .await
        .unwrap(),
        vec!["280|1"]
    );
    ok(&ctx, "DROP TABLE team.public.copy").await;

    // The prefix in the location and an option that says otherwise.
    let mut conflicting = options(&fake);
    conflicting.insert("database_prefix".to_string(), "team-b".to_string());
    let err = register_lance_catalog(&ctx, "bad", "db://mydb/team-a", conflicting)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the option 'database_prefix' ('team-b') differs from the prefix"),
        "{err}"
    );
    let err = register_lance_catalog(&ctx, "bad", "db://mydb/a/b", options(&fake))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("'a/b' is not a database prefix"), "{err}");
}

/// One table with the option, and its plan decoded on a worker: the
/// prefix travels with the plan (it is no secret).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tables_prefix_option_travels_with_its_plans() {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    fake.serve_prefix(Some("p1"));
    let ctx = context(2, &private_cache());
    let err = sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE bare STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("")
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("db://mydb/numbers"), "{err}");
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'db://mydb/numbers' OPTIONS ({})",
            fake.options("'database_prefix' 'p1'")
        ),
    )
    .await;
    let query = "SELECT id, s FROM t WHERE id > 900";
    let want = try_rows(&ctx, query).await.unwrap();
    assert_eq!(want.len(), 93);
    let plan = physical(&ctx, query).await;
    let (worker, decoded) = on_worker(&plan);
    let shown = displayable(decoded.as_ref()).indent(true).to_string();
    assert!(shown.contains("(prefix p1)"), "{shown}");
    let got = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(sorted_rows(&got), want);
}

/// What a user types: `lance-sql --catalog cloud=db://mydb/PREFIX`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lance_sql_attaches_a_database_prefix() {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    fake.serve_prefix(Some("team-a"));
    let out = lance_sql_csv(
        &fake,
        "db://mydb/team-a",
        "SELECT count(*) AS n FROM cloud.public.numbers; \
             CREATE TABLE cloud.public.few AS SELECT id FROM cloud.public.numbers WHERE id < 5; \
             SELECT sum(id) AS s FROM cloud.public.few; \
             DROP TABLE cloud.public.few",
    );
    assert_eq!(out, "n\n941\ncount\n5\ns\n10\n");
}
