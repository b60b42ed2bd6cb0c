//! Versions of `db://` tables: one statement reads one version of each
//! table however often it names it; time travel and tags resolve through
//! the service to the rows that version holds locally.

use crate::cloud::setup;
use datafusion::prelude::SessionContext;

use crate::support::{ok, sorted_rows, sql, try_rows};

/// The rows of `query`, run through the front door (time travel needs it).
async fn rows(ctx: &SessionContext, query: &str) -> Result<Vec<String>, String> {
    sql(ctx, query)
        .await
        .map(|b| sorted_rows(&b))
        .map_err(|e| e.to_string())
}

/// `(SELECT count(*) FROM cloud) - (SELECT count(*) FROM cloud)` asks for
/// the latest version once: both scans read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_statement_reads_one_version_of_a_db_table() {
    let (fake, ctx) = setup().await;
    fake.clear_log();
    let rows = try_rows(
        &ctx,
        "SELECT (SELECT count(*) FROM cloud) - (SELECT count(*) FROM cloud WHERE id >= 0) AS d, \
         (SELECT max(a.id) FROM cloud a JOIN cloud b ON a.id = b.id) AS m",
    )
    .await
    .unwrap();
    assert_eq!(rows, vec!["0|999"]);
    let describes = fake
        .log()
        .iter()
        .filter(|k| **k == "describe_table")
        .count();
    assert_eq!(describes, 1, "{:?}", fake.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_travel_and_tags_resolve_through_the_service() {
    let (fake, ctx) = setup().await;
    let path = fake.table_path("numbers");
    ok(
        &ctx,
        "INSERT INTO cloud VALUES (5000, 1.0, 'x', true, NULL)",
    )
    .await;
    ok(&ctx, "DELETE FROM cloud WHERE id < 100").await;
    let dataset = lance::Dataset::open(&path).await.unwrap();
    dataset.tags().create("before_delete", 3u64).await.unwrap();
    dataset.tags().create("original", 2u64).await.unwrap();

    assert_eq!(
        rows(&ctx, "SELECT * FROM lance_tags('cloud')")
            .await
            .unwrap(),
        vec!["before_delete|3|NULL|NULL", "original|2|NULL|NULL"]
    );
    assert_eq!(
        rows(
            &ctx,
            "SELECT version FROM lance_versions('cloud') ORDER BY version"
        )
        .await
        .unwrap(),
        vec!["1", "2", "3", "4"]
    );
    for (version, tag) in [("2", "original"), ("3", "before_delete"), ("4", "")] {
        let local = format!("SELECT * FROM local VERSION AS OF {version} ORDER BY id");
        let by_number = format!("SELECT * FROM cloud VERSION AS OF {version} ORDER BY id");
        let want = rows(&ctx, &local).await.unwrap();
        assert!(!want.is_empty());
        assert_eq!(rows(&ctx, &by_number).await.unwrap(), want, "{version}");
        if !tag.is_empty() {
            let by_tag = format!("SELECT * FROM lance_as_of('cloud', '{tag}') ORDER BY id");
            assert_eq!(rows(&ctx, &by_tag).await.unwrap(), want, "{tag}");
        }
    }
    assert_eq!(
        rows(
            &ctx,
            "SELECT count(*) FROM cloud VERSION AS OF 'original' WHERE id < 100"
        )
        .await
        .unwrap(),
        rows(
            &ctx,
            "SELECT count(*) FROM local VERSION AS OF 2 WHERE id < 100"
        )
        .await
        .unwrap()
    );
    let err = rows(&ctx, "SELECT * FROM cloud VERSION AS OF 'nope'")
        .await
        .unwrap_err();
    assert!(
        err.contains("'VERSION AS OF 'nope'' on table 'cloud'")
            && err.contains("tag_version failed"),
        "{err}"
    );
}

/// `lance_tag` on a `db://` table is the service's tag request (no new
/// version); `lance_create_index` is its `create_index`; compaction and
/// cleanup are the service's own and refused by name, before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_and_index_functions_go_to_the_service_and_maintenance_is_refused() {
    let (fake, ctx) = setup().await;
    ok(
        &ctx,
        "INSERT INTO cloud VALUES (5000, 1.0, 'x', true, NULL)",
    )
    .await;
    let explained = rows(
        &ctx,
        "EXPLAIN SELECT * FROM lance_tag('cloud', 'create', 'first', 2)",
    )
    .await
    .unwrap()
    .join("\n");
    assert!(
        explained
            .contains("CloudDdlExec: table=db://mydb/numbers, tag=first, action=create, version=2"),
        "{explained}"
    );
    assert_eq!(
        rows(&ctx, "SELECT * FROM lance_tags('cloud')")
            .await
            .unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        rows(
            &ctx,
            "SELECT * FROM lance_tag('cloud', 'create', 'first', 2)"
        )
        .await
        .unwrap(),
        vec!["first|2"]
    );
    assert_eq!(
        rows(&ctx, "SELECT * FROM lance_tag('cloud', 'create', 'latest')")
            .await
            .unwrap(),
        vec!["latest|3"]
    );
    assert_eq!(
        rows(
            &ctx,
            "SELECT * FROM lance_tag('cloud', 'update', 'first', 1)"
        )
        .await
        .unwrap(),
        vec!["first|1"]
    );
    assert_eq!(
        rows(&ctx, "SELECT tag, version FROM lance_tags('cloud')")
            .await
            .unwrap(),
        vec!["first|1", "latest|3"]
    );
    assert_eq!(
        rows(&ctx, "SELECT count(*) FROM cloud VERSION AS OF 'latest'")
            .await
            .unwrap(),
        vec!["942"]
    );
    assert_eq!(
        rows(&ctx, "SELECT * FROM lance_tag('cloud', 'delete', 'first')")
            .await
            .unwrap(),
        vec!["first|NULL"]
    );
    let err = rows(&ctx, "SELECT * FROM lance_tag('cloud', 'create', 'latest')")
        .await
        .unwrap_err();
    assert!(err.contains("create_tag failed"), "{err}");
    // Tags make no version.
    assert_eq!(
        rows(&ctx, "SELECT count(*) FROM lance_versions('cloud')")
            .await
            .unwrap(),
        vec!["3"]
    );

    assert_eq!(
        rows(
            &ctx,
            "SELECT * FROM lance_create_index('cloud', 'id_idx', 'id', 'BTREE')"
        )
        .await
        .unwrap(),
        vec!["id_idx|created|4"]
    );
    fake.clear_log();
    for function in ["lance_vacuum", "lance_optimize"] {
        let err = rows(&ctx, &format!("SELECT * FROM {function}('cloud')"))
            .await
            .unwrap_err();
        assert!(
            err.contains(&format!(
                "'cloud' is a LanceDB table (db://): {function} is not supported for it"
            )),
            "{err}"
        );
    }
    assert!(
        fake.log()
            .iter()
            .all(|r| r.contains("describe") || r.contains("list")),
        "{:?}",
        fake.log()
    );
}
