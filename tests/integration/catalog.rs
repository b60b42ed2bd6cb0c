//! Lance namespaces as catalogs: tables created, written, listed and dropped
//! through SQL, read and written by Lance's own namespace API both ways, and
//! listings that open no table.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use datafusion_lance::{LancePhysicalCodec, plan_lance_sql, register_lance_catalog};
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use lance::Dataset;
use lance_namespace::LanceNamespace;
use lance_namespace::models::{CreateTableRequest, DescribeTableRequest, ListTablesRequest};
use lance_namespace_impls::DirectoryNamespaceBuilder;

use crate::support::{context, ints, ok, private_cache, sorted_rows, sql};

/// Lance's own view of the namespace at `root`.
async fn lance_namespace(root: &str) -> Arc<dyn LanceNamespace> {
    Arc::new(DirectoryNamespaceBuilder::new(root).build().await.unwrap())
}

/// The tables of namespace `id` as `ns` lists them, sorted.
pub(crate) async fn lance_tables(ns: &dyn LanceNamespace, id: &[&str]) -> Vec<String> {
    let mut tables = ns
        .list_tables(ListTablesRequest {
            id: Some(id.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        })
        .await
        .unwrap()
        .tables;
    tables.sort();
    tables
}

/// Where `ns` says table `id` lives, if it has it.
pub(crate) async fn lance_location(ns: &dyn LanceNamespace, id: &[&str]) -> Option<String> {
    ns.describe_table(DescribeTableRequest {
        id: Some(id.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    })
    .await
    .ok()
    .and_then(|r| r.location)
}

/// An Arrow IPC stream of one column `k` holding `values`: the body of a
/// namespace's `create_table` request.
pub(crate) fn k_column_ipc(values: &[i64]) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
    let column = Arc::new(Int64Array::from(values.to_vec()));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column]).unwrap();
    let mut ipc = Vec::new();
    {
        let mut writer = StreamWriter::try_new(&mut ipc, &schema).unwrap();
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
    }
    ipc
}

/// What every kind of namespace runs alike in catalog `lake`: `CREATE TABLE
/// AS` of `public.t` (1,000 rows, one version, the parallel write path), a
/// schema `db` with an empty table `u`, and DML on it.
pub(crate) async fn create_and_change(ctx: &SessionContext) {
    let created = sql(
        ctx,
        "CREATE TABLE lake.public.t AS SELECT value AS id, value * 2 AS v \
         FROM generate_series(1, 1000)",
    )
    .await
    .unwrap();
    assert_eq!(sorted_rows(&created), vec!["1000"]);
    assert_eq!(
        ints(ctx, "SELECT sum(v) FROM lake.public.t").await,
        vec![1001000]
    );
    ok(ctx, "CREATE SCHEMA lake.db").await;
    ok(ctx, "CREATE TABLE lake.db.u (id BIGINT, name VARCHAR)").await;
    ok(
        ctx,
        "INSERT INTO lake.db.u VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    .await;
    ok(ctx, "DELETE FROM lake.db.u WHERE id = 1").await;
    ok(ctx, "UPDATE lake.db.u SET name = 'B' WHERE id = 2").await;
    let rows = sorted_rows(&sql(ctx, "SELECT id, name FROM lake.db.u").await.unwrap());
    assert_eq!(rows, vec!["2|B", "3|c"]);
    assert_eq!(listed(ctx).await, vec!["db|u", "public|t"]);
}

/// A context with a fresh directory namespace attached as catalog `lake`;
/// the directory lives as long as the returned guard.
async fn lake() -> (tempfile::TempDir, String, SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap().to_string();
    let ctx = context(2, &private_cache());
    register_lance_catalog(&ctx, "lake", &root, Default::default())
        .await
        .unwrap();
    (dir, root, ctx)
}

/// `schema|table` of every table information_schema lists in catalog `lake`.
pub(crate) async fn listed(ctx: &SessionContext) -> Vec<String> {
    let batches = sql(
        ctx,
        "SELECT table_schema, table_name FROM information_schema.tables \
         WHERE table_catalog = 'lake' AND table_schema <> 'information_schema'",
    )
    .await
    .unwrap();
    sorted_rows(&batches)
}

async fn error(ctx: &SessionContext, statement: &str) -> String {
    match sql(ctx, statement).await {
        Ok(_) => panic!("{statement}: expected an error"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn tables_are_created_written_listed_and_dropped_in_a_namespace() {
    let (_dir, root, ctx) = lake().await;
    assert!(listed(&ctx).await.is_empty());

    create_and_change(&ctx).await;
    let t = Dataset::open(&format!("{root}/t.lance")).await.unwrap();
    assert_eq!(t.version().version, 1);
    assert_eq!(t.count_rows(None).await.unwrap(), 1000);

    // Lance's own namespace API sees both tables, at the locations we wrote.
    let theirs = lance_namespace(&root).await;
    assert_eq!(lance_tables(theirs.as_ref(), &[]).await, vec!["t"]);
    assert_eq!(lance_tables(theirs.as_ref(), &["db"]).await, vec!["u"]);
    let u = lance_location(theirs.as_ref(), &["db", "u"]).await.unwrap();
    let u = Dataset::open(&u).await.unwrap();
    assert_eq!(u.count_rows(None).await.unwrap(), 2);

    // A table Lance's namespace API creates is ours to read and write.
    theirs
        .create_table(
            CreateTableRequest {
                id: Some(vec!["db".into(), "w".into()]),
                ..Default::default()
            },
            k_column_ipc(&[10, 20, 30]).into(),
        )
        .await
        .unwrap();
    ok(&ctx, "INSERT INTO lake.db.w VALUES (40)").await;
    assert_eq!(ints(&ctx, "SELECT sum(k) FROM lake.db.w").await, vec![100]);
    assert_eq!(listed(&ctx).await, vec!["db|u", "db|w", "public|t"]);

    // CREATE OR REPLACE keeps the table until the new rows are committed:
    // one overwrite, version 2.
    ok(
        &ctx,
        "CREATE OR REPLACE TABLE lake.public.t AS SELECT value AS id, value AS v \
         FROM generate_series(1, 10)",
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(v) FROM lake.public.t").await,
        vec![10, 55]
    );
    let t = Dataset::open(&format!("{root}/t.lance")).await.unwrap();
    assert_eq!(t.version().version, 2);

    // Drops: the namespace entry and the data go; Lance agrees.
    let u_location = lance_location(theirs.as_ref(), &["db", "u"]).await.unwrap();
    ok(&ctx, "DROP TABLE lake.db.u").await;
    ok(&ctx, "DROP TABLE lake.db.w").await;
    assert_eq!(listed(&ctx).await, vec!["public|t"]);
    assert!(
        lance_location(theirs.as_ref(), &["db", "u"])
            .await
            .is_none()
    );
    assert!(!std::path::Path::new(u_location.trim_start_matches("file://")).exists());
    ok(&ctx, "DROP SCHEMA lake.db").await;
    ok(&ctx, "DROP TABLE lake.public.t").await;
    assert!(!std::path::Path::new(&format!("{root}/t.lance")).exists());
    assert!(listed(&ctx).await.is_empty());
}

#[tokio::test]
async fn bad_catalog_statements_fail_clearly_and_change_nothing() {
    let (_dir, root, ctx) = lake().await;
    ok(
        &ctx,
        "CREATE TABLE lake.public.t AS SELECT 1 AS id, 'a' AS name",
    )
    .await;

    let e = error(
        &ctx,
        "CREATE TABLE lake.public.t AS SELECT 2 AS id, 'b' AS name",
    )
    .await;
    assert!(
        e.contains("CREATE TABLE lake.public.t: the table already exists"),
        "{e}"
    );
    ok(
        &ctx,
        "CREATE TABLE IF NOT EXISTS lake.public.t AS SELECT 3 AS id, 'c' AS name",
    )
    .await;
    let e = error(
        &ctx,
        "CREATE OR REPLACE TABLE lake.public.t AS SELECT 1.5 AS x",
    )
    .await;
    assert!(e.contains("the new columns differ from the table's"), "{e}");
    let e = error(&ctx, "CREATE TABLE lake.nosuch.x (id INT)").await;
    assert!(e.contains("schema 'lake.nosuch' does not exist"), "{e}");
    let e = error(&ctx, "CREATE TABLE lake.public.k (id INT PRIMARY KEY)").await;
    assert!(
        e.contains("constraints (PRIMARY KEY, UNIQUE) are not supported"),
        "{e}"
    );
    let e = error(&ctx, "DROP TABLE lake.public.missing").await;
    assert!(
        e.contains("DROP TABLE lake.public.missing: no such table"),
        "{e}"
    );
    ok(&ctx, "DROP TABLE IF EXISTS lake.public.missing").await;
    let e = error(&ctx, "DROP SCHEMA lake.public").await;
    assert!(e.contains("root of the Lance namespace"), "{e}");
    // DataFusion's own planner cannot make an in-memory table in the catalog.
    let e = ctx
        .sql("CREATE TABLE lake.public.m AS SELECT 1 AS id")
        .await
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("are created by lance_sql or lance-sql"), "{e}");

    // EXPLAIN plans the write and writes nothing.
    let plan = sorted_rows(
        &sql(&ctx, "EXPLAIN CREATE TABLE lake.public.x AS SELECT 1 AS id")
            .await
            .unwrap(),
    )
    .join("\n");
    assert!(plan.contains("LanceCommitExec"), "{plan}");
    assert!(!std::path::Path::new(&format!("{root}/x.lance")).exists());

    // Only the first table, as first written.
    assert_eq!(
        sorted_rows(
            &sql(&ctx, "SELECT id, name FROM lake.public.t")
                .await
                .unwrap()
        ),
        vec!["1|a"]
    );
    let t = Dataset::open(&format!("{root}/t.lance")).await.unwrap();
    assert_eq!(t.version().version, 1);
    let entries: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("__manifest"))
        .collect();
    assert_eq!(entries, vec!["t.lance"]);
}

#[tokio::test]
async fn listing_opens_no_table() {
    let (_dir, root, ctx) = lake().await;
    ok(&ctx, "CREATE TABLE lake.public.good AS SELECT 1 AS id").await;
    // A table directory whose dataset cannot be opened: listing it must
    // not try.
    std::fs::create_dir_all(format!("{root}/broken.lance/_versions")).unwrap();
    std::fs::write(
        format!("{root}/broken.lance/_versions/1.manifest"),
        b"not a manifest",
    )
    .unwrap();
    assert_eq!(listed(&ctx).await, vec!["public|broken", "public|good"]);
    let shown = sorted_rows(&sql(&ctx, "SHOW TABLES").await.unwrap()).join("\n");
    assert!(shown.contains("lake|public|broken|BASE TABLE"), "{shown}");
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM lake.public.good").await,
        vec![1]
    );
    let e = error(&ctx, "SELECT * FROM lake.public.broken").await;
    assert!(e.contains("broken.lance"), "{e}");
}

#[tokio::test]
async fn catalog_tables_take_schema_changes_merges_and_time_travel() {
    let (_dir, root, ctx) = lake().await;
    ok(
        &ctx,
        "CREATE TABLE lake.public.t AS SELECT value AS id, value * 10 AS v \
         FROM generate_series(1, 5)",
    )
    .await;

    // ALTER TABLE: the next statement sees the new column (the catalog
    // opens the table afresh; nothing is registered again).
    ok(
        &ctx,
        "ALTER TABLE lake.public.t ADD COLUMN w BIGINT AS (v + 1)",
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT sum(w) FROM lake.public.t").await,
        vec![155]
    );
    let e = error(&ctx, "ALTER TABLE lake.public.t RENAME TO u").await;
    assert!(
        e.contains("the Lance catalog 'lake' is a directory namespace, which cannot rename"),
        "{e}"
    );

    // MERGE INTO with a staging table of the session's own catalog.
    ok(
        &ctx,
        "CREATE TABLE staging AS SELECT * FROM (VALUES (5, 0, 0), (6, 60, 61)) AS s(id, v, w)",
    )
    .await;
    ok(
        &ctx,
        "MERGE INTO lake.public.t AS t USING staging AS s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET v = s.v, w = s.w \
         WHEN NOT MATCHED THEN INSERT (id, v, w) VALUES (s.id, s.v, s.w)",
    )
    .await;
    assert_eq!(
        sorted_rows(
            &sql(&ctx, "SELECT id, v FROM lake.public.t WHERE id >= 5")
                .await
                .unwrap()
        ),
        vec!["5|0", "6|60"]
    );

    // Versions and time travel by the catalog name.
    let versions = sorted_rows(
        &sql(
            &ctx,
            "SELECT version, operation FROM lance_versions('lake.public.t')",
        )
        .await
        .unwrap(),
    );
    assert_eq!(versions.len(), 3, "{versions:?}");
    // (`VERSION AS OF` needs lance_sql: DataFusion's parser rejects it.)
    let old = sql(&ctx, "SELECT sum(v) FROM lake.public.t VERSION AS OF 1")
        .await
        .unwrap();
    assert_eq!(sorted_rows(&old), vec!["150"]);
    let e = error(&ctx, "SELECT w FROM lake.public.t VERSION AS OF 1").await;
    assert!(e.contains("w"), "{e}");
    let t = Dataset::open(&format!("{root}/t.lance")).await.unwrap();
    assert_eq!(t.version().version, 3);
}

/// `CREATE TABLE AS` into a catalog is a plan like any other: encoded,
/// decoded by a context with no catalog, and run there, it creates the
/// table the catalog then lists. (Tables of child namespaces are also
/// registered with the namespace after the plan runs: `lance_sql` does
/// that, a plan run elsewhere does not.)
#[tokio::test]
async fn create_table_as_round_trips_through_the_codec() {
    let (_dir, root, ctx) = lake().await;
    let state = ctx.state();
    let plan = plan_lance_sql(
        &state,
        "CREATE TABLE lake.public.x AS SELECT value AS id FROM generate_series(1, 300)",
    )
    .await
    .unwrap()
    .expect("ours");
    let plan = state.create_physical_plan(&plan).await.unwrap();
    let codec = LancePhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(plan, &codec).unwrap();
    // Planning wrote nothing.
    assert!(!std::path::Path::new(&format!("{root}/x.lance")).exists());

    let worker = context(2, &private_cache());
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap();
    let written = sorted_rows(&collect(decoded, worker.task_ctx()).await.unwrap());
    assert_eq!(written, vec!["300"]);
    assert_eq!(listed(&ctx).await, vec!["public|x"]);
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(id) FROM lake.public.x").await,
        vec![300, 45150]
    );
}

/// Table functions that look their table up while planned find catalog
/// tables every time: `lance_sql` looks them up before planning (the lookup
/// was polled once and failed about one call in three). Through
/// `SessionContext::sql` the error says so, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_functions_find_catalog_tables_every_time() {
    let (_dir, _root, ctx) = lake().await;
    ok(
        &ctx,
        "CREATE TABLE lake.public.docs AS SELECT CAST(value AS BIGINT) AS id, \
         CASE WHEN value % 2 = 0 THEN 'red fox' ELSE 'blue sky' END AS text, \
         arrow_cast(make_array(CAST(value AS FLOAT), 1.0), 'FixedSizeList(2, Float32)') AS emb \
         FROM generate_series(0, 19)",
    )
    .await;
    ok(
        &ctx,
        "CREATE INDEX text_idx ON lake.public.docs USING INVERTED (text)",
    )
    .await;
    let statements = [
        (
            "SELECT count(*) FROM lance_fts('lake.public.docs', 'red')",
            "10",
        ),
        (
            "SELECT count(*) FROM lance_vector_search('lake.public.docs', 'emb', [3.0, 1.0], 4)",
            "4",
        ),
        (
            "SELECT count(*) FROM lance_hybrid_search('lake.public.docs', 'emb', [3.0, 1.0], 'red', 3)",
            "3",
        ),
        ("SELECT count(*) FROM lance_rows('lake.public.docs')", "20"),
        (
            "SELECT (SELECT count(*) FROM lance_fts('lake.public.docs', 'blue')) AS a, \
             (SELECT count(*) FROM lance_rows('docs')) AS b",
            "10|20",
        ),
    ];
    ok(&ctx, "SET datafusion.catalog.default_catalog = 'lake'").await;
    for round in 0..20 {
        for (statement, expected) in statements {
            let rows = sql(&ctx, statement)
                .await
                .unwrap_or_else(|e| panic!("round {round}: {statement}: {e}"));
            assert_eq!(
                sorted_rows(&rows),
                vec![expected],
                "round {round}: {statement}"
            );
        }
    }
    // Every statement kind a search can stand in finds the table too.
    ok(
        &ctx,
        "CREATE TABLE lake.public.near AS SELECT id FROM \
         lance_vector_search('lake.public.docs', 'emb', [3.0, 1.0], 4)",
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO lake.public.near SELECT id FROM lance_fts( /* red */ 'lake.public.docs', 'red')",
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM lake.public.near").await,
        vec![14]
    );
    let plan = sorted_rows(
        &sql(
            &ctx,
            "EXPLAIN SELECT id FROM lance_rows('lake.public.docs')",
        )
        .await
        .unwrap(),
    )
    .join("\n");
    assert!(
        plan.contains("LanceScanExec") && plan.contains("docs.lance"),
        "{plan}"
    );
    for _ in 0..5 {
        let error = ctx
            .sql("SELECT * FROM lance_fts('lake.public.docs', 'red')")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "finding 'lake.public.docs' needs I/O (catalog 'lake' looks its tables up)"
            ) && error.contains("lance_sql"),
            "{error}"
        );
    }
}

/// Names cannot leave the catalog's root: a table name holding `..` or a
/// path separator creates nothing, reads nothing and drops nothing outside
/// it (a dataset next to the root stays whole); names the namespace could
/// not look up again are refused before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_never_escape_the_catalog_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    std::fs::create_dir(&root).unwrap();
    let outside = dir.path().join("escape.lance");
    crate::fixtures::numbers(outside.to_str().unwrap()).await;
    let before = crate::support::all_files(&outside);
    let ctx = context(2, &private_cache());
    register_lance_catalog(&ctx, "lake", root.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    let rule = "catalog, schema and table names hold only ASCII letters, digits, '_', '-' and '.'";
    for (statement, expected) in [
        (
            r#"CREATE TABLE lake.public."../escape" AS SELECT 1 AS x"#,
            rule,
        ),
        (
            r#"CREATE TABLE lake.public."../new" AS SELECT 1 AS x"#,
            rule,
        ),
        (
            r#"CREATE TABLE lake.public."sub/inner" AS SELECT 1 AS x"#,
            rule,
        ),
        (r#"CREATE TABLE lake.public."é" AS SELECT 1 AS x"#, rule),
        (r#"CREATE TABLE lake.public."a$b" (x INT)"#, rule),
        (r#"CREATE TABLE lake.public."" (x INT)"#, rule),
        (r#"CREATE SCHEMA lake."../up""#, rule),
        (r#"CREATE SCHEMA lake."ü""#, rule),
        (
            r#"SELECT count(*) FROM lake.public."../escape""#,
            "not found",
        ),
        (
            r#"INSERT INTO lake.public."../escape" VALUES (1)"#,
            "not found",
        ),
        (r#"DROP TABLE lake.public."../escape""#, "no such table"),
        (
            r#"SELECT * FROM lance_versions('lake.public."../escape"')"#,
            "neither a Lance table",
        ),
    ] {
        let error = error(&ctx, statement).await;
        assert!(error.contains(expected), "{statement}: {error}");
    }
    assert_eq!(
        crate::support::all_files(&outside),
        before,
        "the dataset outside changed"
    );
    assert!(!dir.path().join("new.lance").exists());
    let mut inside: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    inside.retain(|name| !name.starts_with("__manifest"));
    assert!(inside.is_empty(), "written under the root: {inside:?}");
    assert_eq!(listed(&ctx).await, Vec::<String>::new());
    // Allowed names work.
    ok(
        &ctx,
        "CREATE TABLE lake.public.\"Orders-2026.v1\" AS SELECT 1 AS x",
    )
    .await;
    assert_eq!(listed(&ctx).await, vec!["public|Orders-2026.v1"]);
}

/// A `CREATE TABLE AS` that fails midway (its writers had written files)
/// leaves nothing: not listed, not in the way of the next `CREATE TABLE` of
/// the name, no directory under the root; the same for a `COPY` to a new
/// location.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_table_as_leaves_its_name_free() {
    let (dir, root, ctx) = lake().await;
    ok(&ctx, "SET lance.max_rows_per_file = 1000").await;
    let failing = "SELECT CAST(value AS BIGINT) AS id, CAST(10 / (value - 15000) AS BIGINT) AS x \
                   FROM generate_series(0, 20000)";
    for target in ["lake.public.f", "lake.db.f"] {
        if target == "lake.db.f" {
            ok(&ctx, "CREATE SCHEMA lake.db").await;
        }
        let error = error(&ctx, &format!("CREATE TABLE {target} AS {failing}")).await;
        assert!(error.contains("Divide by zero"), "{error}");
        let mut left: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|name| !name.starts_with("__manifest"))
            .collect();
        left.sort();
        assert!(left.is_empty(), "{target}: left under the root: {left:?}");
        ok(&ctx, &format!("CREATE TABLE {target} AS SELECT 1 AS x")).await;
        assert_eq!(
            ints(&ctx, &format!("SELECT count(*) FROM {target}")).await,
            vec![1]
        );
        ok(&ctx, &format!("DROP TABLE {target}")).await;
    }
    assert_eq!(listed(&ctx).await, Vec::<String>::new());

    let copy = dir.path().join("copied.lance");
    let error = error(
        &ctx,
        &format!("COPY ({failing}) TO '{}' STORED AS LANCE", copy.display()),
    )
    .await;
    assert!(error.contains("Divide by zero"), "{error}");
    assert!(!copy.exists(), "the failed COPY left {}", copy.display());
}
