//! A Lance REST namespace as a catalog: Lance's own REST server (the
//! adapter of lance-namespace-impls, over a directory namespace) on
//! 127.0.0.1, written through SQL and read back by Lance's REST client and
//! by the directory namespace behind the server.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use datafusion_lance::register_lance_catalog;
use lance::Dataset;
use lance_namespace::LanceNamespace;
use lance_namespace::models::CreateTableRequest;
use lance_namespace_impls::{
    DirectoryNamespaceBuilder, RestAdapter, RestAdapterConfig, RestAdapterHandle,
    RestNamespaceBuilder,
};

use crate::catalog::{create_and_change, k_column_ipc, lance_location, lance_tables, listed};
use crate::support::{context, ints, ok, private_cache, sorted_rows, sql};

/// Lance's REST server over a directory namespace in a temporary directory,
/// listening on 127.0.0.1 (an ephemeral port) until dropped.
struct Server {
    dir: tempfile::TempDir,
    handle: RestAdapterHandle,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let backend = DirectoryNamespaceBuilder::new(dir.path().to_str().unwrap())
            .build()
            .await
            .unwrap();
        let config = RestAdapterConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
        };
        let handle = RestAdapter::new(Arc::new(backend), config)
            .start()
            .await
            .unwrap();
        Self { dir, handle }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.handle.port())
    }

    /// Lance's REST client for the server.
    fn client(&self) -> Arc<dyn LanceNamespace> {
        Arc::new(RestNamespaceBuilder::new(self.url()).build())
    }

    /// The directory namespace behind the server, opened afresh.
    async fn backend(&self) -> Arc<dyn LanceNamespace> {
        let root = self.dir.path().to_str().unwrap();
        Arc::new(DirectoryNamespaceBuilder::new(root).build().await.unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

fn id(parts: &[&str]) -> Option<Vec<String>> {
    Some(parts.iter().map(|s| s.to_string()).collect())
}

async fn attach(server: &Server) -> SessionContext {
    let ctx = context(2, &private_cache());
    let root = format!("rest+{}", server.url());
    register_lance_catalog(&ctx, "lake", &root, Default::default())
        .await
        .unwrap();
    ctx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_namespace_is_a_catalog_read_and_written_both_ways() {
    let server = Server::start().await;
    let ctx = attach(&server).await;
    assert!(listed(&ctx).await.is_empty());

    // CREATE TABLE AS (declared by the server, written where it says), a
    // schema, an empty table in it and DML, as in a directory namespace.
    create_and_change(&ctx).await;
    let theirs = server.client();
    assert_eq!(lance_tables(theirs.as_ref(), &[]).await, vec!["t"]);
    let t = lance_location(theirs.as_ref(), &["t"]).await.unwrap();
    let t = Dataset::open(&t).await.unwrap();
    assert_eq!(t.version().version, 1);
    assert_eq!(t.count_rows(None).await.unwrap(), 1000);

    // The directory namespace behind the server agrees.
    let backend = server.backend().await;
    assert_eq!(lance_tables(backend.as_ref(), &["db"]).await, vec!["u"]);
    let u = lance_location(backend.as_ref(), &["db", "u"])
        .await
        .unwrap();
    let u = Dataset::open(&u).await.unwrap();
    assert_eq!(u.version().version, 4);
    assert_eq!(u.count_rows(None).await.unwrap(), 2);

    // A table Lance's REST client creates is ours to read and write.
    let request = CreateTableRequest {
        id: id(&["db", "w"]),
        ..Default::default()
    };
    let ipc = k_column_ipc(&[10, 20, 30]);
    theirs.create_table(request, ipc.into()).await.unwrap();
    ok(&ctx, "INSERT INTO lake.db.w VALUES (40)").await;
    assert_eq!(ints(&ctx, "SELECT sum(k) FROM lake.db.w").await, vec![100]);
    assert_eq!(listed(&ctx).await, vec!["db|u", "db|w", "public|t"]);

    // Drops: the namespace entry and the data go.
    let u_location = lance_location(backend.as_ref(), &["db", "u"])
        .await
        .unwrap();
    ok(&ctx, "DROP TABLE lake.db.u").await;
    ok(&ctx, "DROP TABLE lake.db.w").await;
    assert_eq!(
        lance_tables(theirs.as_ref(), &["db"]).await,
        Vec::<String>::new()
    );
    assert!(!std::path::Path::new(u_location.trim_start_matches("file://")).exists());
    ok(&ctx, "DROP SCHEMA lake.db").await;
    ok(&ctx, "DROP TABLE lake.public.t").await;
    assert!(listed(&ctx).await.is_empty());
    assert_eq!(
        lance_tables(theirs.as_ref(), &[]).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_create_in_a_rest_namespace_leaves_no_table() {
    let server = Server::start().await;
    let ctx = attach(&server).await;
    ok(&ctx, "CREATE TABLE lake.public.t AS SELECT 1 AS id").await;

    // The cast of 'x' fails while the rows are written, after the server
    // declared the table: the declaration is dropped again.
    let bad = "CREATE TABLE lake.public.bad AS \
               SELECT CAST(column1 AS INT) AS n FROM (VALUES ('1'), ('x'))";
    let e = sql(&ctx, bad).await.unwrap_err().to_string();
    assert!(e.contains("Cannot cast string 'x'"), "{e}");
    let backend = server.backend().await;
    assert_eq!(lance_tables(backend.as_ref(), &[]).await, vec!["t"]);
    assert!(lance_location(backend.as_ref(), &["bad"]).await.is_none());
    assert_eq!(listed(&ctx).await, vec!["public|t"]);
    // ... so the same name can be created afterwards.
    ok(
        &ctx,
        "CREATE TABLE lake.public.bad AS SELECT CAST(column1 AS INT) AS n FROM (VALUES ('1'))",
    )
    .await;
    assert_eq!(ints(&ctx, "SELECT n FROM lake.public.bad").await, vec![1]);

    // EXPLAIN plans the write and declares nothing.
    let plan = sorted_rows(
        &sql(&ctx, "EXPLAIN CREATE TABLE lake.public.x AS SELECT 1 AS id")
            .await
            .unwrap(),
    )
    .join("\n");
    assert!(plan.contains("LanceCommitExec"), "{plan}");
    assert!(lance_location(backend.as_ref(), &["x"]).await.is_none());

    let e = sql(&ctx, "CREATE TABLE lake.public.t AS SELECT 2 AS id")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("CREATE TABLE lake.public.t: the table already exists"),
        "{e}"
    );
    assert_eq!(ints(&ctx, "SELECT id FROM lake.public.t").await, vec![1]);

    // A permutation plan is not built into a REST namespace table (the
    // server names the location only when the table is declared, which
    // planning may not do): refused, nothing declared.
    let e = sql(
        &ctx,
        "SELECT * FROM lance_build_permutation('lake.public.t', 'lake.public.p', 'split=random', \
         'fixed=2')",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(
            "permutation plan 'lake.public.p': table 'lake.public.p' would be in a Lance REST \
             namespace"
        ) && e.contains("build it into a location instead"),
        "{e}"
    );
    assert!(lance_location(backend.as_ref(), &["p"]).await.is_none());
}

#[tokio::test]
async fn an_unreachable_rest_namespace_is_named_and_its_secrets_are_not() {
    // Nothing listens on port 1 of the loopback address: the connection is
    // refused at once.
    let ctx = context(2, &private_cache());
    let options = BTreeMap::from([(
        "header.Authorization".to_string(),
        "Bearer sekrit-token".to_string(),
    )]);
    let e = register_lance_catalog(&ctx, "lake", "rest+http://127.0.0.1:1", options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Lance namespace 'rest+http://127.0.0.1:1': listing tables failed"),
        "{e}"
    );
    assert!(!e.contains("sekrit"), "{e}");

    let e = register_lance_catalog(&ctx, "lake", "rest+ftp://127.0.0.1:1", Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("must start with rest+http:// or rest+https://"),
        "{e}"
    );
}
