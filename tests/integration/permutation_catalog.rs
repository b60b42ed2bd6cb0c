//! Permutation plans built into tables of a Lance directory catalog, shipped
//! through the physical codec: the node carries only the table's names and
//! location; the process that runs it makes the namespace entry through its
//! own catalog, and refuses before writing when it has none (or another).

use std::path::Path;
use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use datafusion_lance::{LancePhysicalCodec, LanceSessionContextExt, register_lance_catalog};
use datafusion_proto::bytes::{
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use lance_namespace_impls::DirectoryNamespaceBuilder;

use crate::catalog::{lance_location, lance_tables, listed};
use crate::support::{context, ok, private_cache, sorted_rows, sql};

const BUILD: &str = "SELECT split_name, rows FROM lance_build_permutation('lake.public.base', \
                     'lake.ml.p', 'split=sequential', 'counts=30,20', 'names=train,test')";

/// A context with catalog `lake` over `root`.
async fn with_lake(root: &Path) -> SessionContext {
    let ctx = context(2, &private_cache());
    register_lance_catalog(&ctx, "lake", root.to_str().unwrap(), Default::default())
        .await
        .unwrap();
    ctx
}

/// The entries of `root` (the namespace's manifest table aside).
fn entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| !name.starts_with("__manifest"))
        .collect();
    names.sort();
    names
}

/// `plan` encoded, then decoded in `worker`.
fn shipped(plan: &Arc<dyn ExecutionPlan>, worker: &SessionContext) -> Arc<dyn ExecutionPlan> {
    let codec = LancePhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(plan), &codec).unwrap();
    physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_built_into_a_catalog_table_is_registered_by_the_process_that_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    std::fs::create_dir(&root).unwrap();
    let origin = with_lake(&root).await;
    ok(
        &origin,
        "CREATE TABLE lake.public.base AS SELECT value AS id FROM generate_series(0, 49)",
    )
    .await;
    ok(&origin, "CREATE SCHEMA lake.ml").await;
    let plan = origin
        .lance_sql(BUILD)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let before = entries(&root);

    // A process without the catalog refuses before writing anything.
    let bare = context(2, &private_cache());
    let e = collect(shipped(&plan, &bare), bare.task_ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("table 'lake.ml.p': its Lance catalog is not registered in this process"),
        "{e}"
    );
    assert_eq!(entries(&root), before);

    // Nor does one whose `lake` is another namespace.
    let elsewhere = dir.path().join("other");
    std::fs::create_dir(&elsewhere).unwrap();
    let other = with_lake(&elsewhere).await;
    let e = collect(shipped(&plan, &other), other.task_ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("catalog 'lake' of this process is over another namespace"),
        "{e}"
    );
    assert_eq!(entries(&root), before);
    assert!(entries(&elsewhere).is_empty());

    // A worker with the same catalog builds it and makes the entry.
    let worker = with_lake(&root).await;
    let rows = sorted_rows(
        &collect(shipped(&plan, &worker), worker.task_ctx())
            .await
            .unwrap(),
    );
    assert_eq!(rows, vec!["test|20", "train|30"]);
    let namespace = DirectoryNamespaceBuilder::new(root.to_str().unwrap())
        .build()
        .await
        .unwrap();
    assert_eq!(lance_tables(&namespace, &["ml"]).await, vec!["p"]);
    let location = lance_location(&namespace, &["ml", "p"]).await.unwrap();
    assert!(location.contains("_ml$p"), "{location}");
    assert_eq!(listed(&origin).await, vec!["ml|p", "public|base"]);
    let read = "SELECT count(*), min(id), max(id) FROM lance_permutation('lake.ml.p', 'test')";
    assert_eq!(
        sorted_rows(&sql(&origin, read).await.unwrap()),
        vec!["20|30|49"]
    );
    // Through `SessionContext::sql` (no lookup before planning) the name is
    // not taken for a path: the error says what to do.
    let e = origin.sql(read).await.unwrap_err().to_string();
    assert!(e.contains("finding 'lake.ml.p' needs I/O"), "{e}");
    assert_eq!(
        sorted_rows(
            &sql(
                &origin,
                "SELECT max(version) FROM lance_versions('lake.ml.p')"
            )
            .await
            .unwrap()
        ),
        vec!["1"]
    );
}
