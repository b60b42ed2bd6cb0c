//! A LanceDB database as a catalog (`db://DATABASE`): its tables listed
//! and read, `CREATE TABLE … AS`, `CREATE TABLE` without rows and `DROP
//! TABLE` as requests, from the library and from `lance-sql`.

use std::collections::BTreeMap;

use datafusion_lance::register_lance_catalog;

use crate::cloud::{lance_sql_csv, setup};
use crate::fake_cloud::{API_KEY, FakeCloud};
use crate::fixtures;
use crate::support::{ok, sorted_rows, sql, try_rows};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_is_a_catalog_of_its_tables() {
    let (fake, ctx) = setup().await;
    let options = |key: &str| {
        BTreeMap::from([
            ("api_key".to_string(), key.to_string()),
            ("host_override".to_string(), fake.url()),
        ])
    };
    register_lance_catalog(&ctx, "lancedb", "db://mydb", options(API_KEY))
        .await
        .unwrap();
    let tables = try_rows(
        &ctx,
        "SELECT table_schema, table_name FROM information_schema.tables \
         WHERE table_catalog = 'lancedb' AND table_schema <> 'information_schema'",
    )
    .await
    .unwrap();
    assert_eq!(tables, vec!["public|numbers"]);
    assert_eq!(
        try_rows(&ctx, "SELECT count(*), sum(id) FROM lancedb.public.numbers")
            .await
            .unwrap(),
        vec!["941|470118"]
    );
    let err = sql(&ctx, "SELECT * FROM lancedb.public.nope")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lancedb.public.nope") && err.contains("not found"),
        "{err}"
    );
    let err = sql(&ctx, "CREATE SCHEMA lancedb.s")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("catalog 'lancedb' (db://mydb): a LanceDB database is one schema"),
        "{err}"
    );
    // CTAS: the rows fit in one request, which creates the table; the
    // listing knows the table at once.
    fake.clear_log();
    let out = sql(
        &ctx,
        "CREATE TABLE lancedb.public.copy AS SELECT id, s FROM lancedb.public.numbers WHERE id < 100",
    )
    .await
    .unwrap();
    assert_eq!(sorted_rows(&out), vec!["94"]);
    assert!(
        fake.log().contains(&"create_table") && !fake.log().contains(&"insert_into_table"),
        "{:?}",
        fake.log()
    );
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lancedb' \
             AND table_schema = 'public' ORDER BY table_name"
        )
        .await
        .unwrap(),
        vec!["copy", "numbers"]
    );
    assert_eq!(
        try_rows(&ctx, "SELECT count(*), sum(id) FROM lancedb.public.copy")
            .await
            .unwrap(),
        try_rows(&ctx, "SELECT count(*), sum(id) FROM local WHERE id < 100")
            .await
            .unwrap()
    );
    let err = sql(&ctx, "CREATE TABLE lancedb.public.copy AS SELECT 1 AS id")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CREATE TABLE lancedb.public.copy: the table already exists"),
        "{err}"
    );
    ok(
        &ctx,
        "CREATE TABLE IF NOT EXISTS lancedb.public.copy AS SELECT 1 AS id",
    )
    .await;
    ok(
        &ctx,
        "CREATE OR REPLACE TABLE lancedb.public.copy AS SELECT id, s FROM local WHERE id < 3",
    )
    .await;
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM lancedb.public.copy")
            .await
            .unwrap(),
        vec!["3"]
    );
    // Without AS: an empty table of those columns.
    ok(&ctx, "CREATE TABLE lancedb.public.empty (a INT, b VARCHAR)").await;
    ok(&ctx, "INSERT INTO lancedb.public.empty VALUES (1, 'x')").await;
    assert_eq!(
        try_rows(&ctx, "SELECT * FROM lancedb.public.empty")
            .await
            .unwrap(),
        vec!["1|x"]
    );
    ok(&ctx, "DROP TABLE lancedb.public.empty").await;
    ok(&ctx, "DROP TABLE lancedb.public.copy").await;
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lancedb' \
             AND table_schema = 'public'"
        )
        .await
        .unwrap(),
        vec!["numbers"]
    );
    ok(&ctx, "DROP TABLE IF EXISTS lancedb.public.copy").await;
    let err = sql(&ctx, "DROP TABLE lancedb.public.copy")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "DROP TABLE lancedb.public.copy: no such table in the LanceDB database db://mydb"
        ),
        "{err}"
    );
    let err = register_lance_catalog(&ctx, "bad", "db://mydb", options("sk-nope"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'db://mydb': listing tables failed") && !err.contains("sk-nope"),
        "{err}"
    );
}

/// What a user types: the key and the service from the environment, the
/// database attached with `--catalog`, several statements in one `-c`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lance_sql_attaches_a_database_with_the_key_from_the_environment() {
    let fake = FakeCloud::start().await;
    fixtures::numbers(&fake.table_path("numbers")).await;
    let out = lance_sql_csv(
        &fake,
        "db://mydb",
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'cloud' \
             AND table_schema = 'public'; \
             SELECT count(*) AS n, sum(id) AS s FROM cloud.public.numbers WHERE id >= 500; \
             CREATE TABLE cloud.public.big AS SELECT id, s FROM cloud.public.numbers WHERE id >= 500; \
             UPDATE cloud.public.big SET s = 'u' WHERE id < 600; \
             DELETE FROM cloud.public.big WHERE id >= 900; \
             SELECT version, count(*) OVER () AS versions FROM lance_versions('cloud.public.big') \
             ORDER BY version DESC LIMIT 1; \
             SELECT count(*) AS n, sum(CASE WHEN s = 'u' THEN 1 ELSE 0 END) AS u FROM cloud.public.big; \
             DROP TABLE cloud.public.big; \
             SELECT count(*) AS tables FROM information_schema.tables WHERE table_catalog = 'cloud' \
             AND table_schema = 'public'",
    );
    assert_eq!(
        out,
        "table_name\nnumbers\nn,s\n471,352913\ncount\n471\ncount\n95\ncount\n94\n\
         version,versions\n3,3\nn,u\n377,95\ntables\n1\n"
    );
}
