//! Snapshot pinning: one version per query, whatever writers do meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, collect, execute_stream_partitioned,
};
use datafusion::prelude::SessionContext;
use datafusion_lance::LanceTableProvider;
use datafusion_lance::physical_plan::LanceScanExec;
use futures::TryStreamExt;
use lance::dataset::WriteMode;

use crate::fixtures::{numbers_batch, params, write};
use crate::support::faults::FaultInjector;
use crate::support::{append_elsewhere, context, dataset_path, ints, private_cache};

/// Table `t`: 400 numbers rows in fragments of 50, registered in a context
/// with `partitions` target partitions. Returns the dataset URI and context.
async fn numbers_table(dir: &tempfile::TempDir, partitions: usize) -> (String, SessionContext) {
    let uri = dataset_path(dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 400)],
        params(WriteMode::Create, 50),
    )
    .await;
    let ctx = context(partitions, &private_cache());
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .unwrap();
    (uri, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_planned_query_reads_its_version_after_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, ctx) = numbers_table(&dir, 4).await;

    let df = ctx.sql("SELECT id FROM t WHERE id >= 0").await.unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    assert!(plan.output_partitioning().partition_count() >= 2);

    // Start partition 0, commit a new version, then run the other partitions.
    let task = ctx.task_ctx();
    let mut streams = execute_stream_partitioned(Arc::clone(&plan), Arc::clone(&task)).unwrap();
    let first: Vec<_> = streams.remove(0).try_collect().await.unwrap();
    write(
        &uri,
        vec![numbers_batch(400, 100)],
        params(WriteMode::Append, 50),
    )
    .await;
    let mut rows: usize = first.iter().map(|b| b.num_rows()).sum();
    for stream in streams {
        let batches: Vec<_> = stream.try_collect().await.unwrap();
        rows += batches.iter().map(|b| b.num_rows()).sum::<usize>();
    }
    assert_eq!(rows, 400, "every partition read the planned version");

    // Re-executing the same plan still reads the planned version.
    let again: usize = collect(plan, task)
        .await
        .unwrap()
        .iter()
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(again, 400);

    // The next query sees the new version.
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t WHERE id >= 0").await,
        vec![500]
    );
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![500]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_only_see_committed_versions_while_a_writer_commits() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 100)],
        params(WriteMode::Create, 50),
    )
    .await;
    let ctx = context(3, &private_cache());
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let uri = uri.clone();
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            for k in 1..=15i64 {
                write(
                    &uri,
                    vec![numbers_batch(k * 100, 100)],
                    params(WriteMode::Append, 30),
                )
                .await;
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut observed = 0;
    while !done.load(Ordering::SeqCst) || observed == 0 {
        // count, sum and a self-join of the table in ONE query: all from one version.
        let r = ints(
            &ctx,
            "SELECT count(*) AS n, sum(id) AS s, (SELECT count(*) FROM t t2 WHERE t2.id >= 0) AS n2 FROM t WHERE id >= 0",
        )
        .await;
        let (count, sum, count2) = (r[0], r[1], r[2]);
        assert_eq!(count % 100, 0, "a torn version: {count} rows");
        assert_eq!(sum, count * (count - 1) / 2, "rows 0..{count} exactly once");
        assert_eq!(count, count2, "two scans of one query read one version");
        observed += 1;
    }
    writer.await.unwrap();
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![1600]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_table_ignores_new_versions() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 10)],
        params(WriteMode::Create, 50),
    )
    .await;
    let ctx = context(2, &private_cache());
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t1 STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.version' '1')"
    ))
    .await
    .unwrap();
    write(
        &uri,
        vec![numbers_batch(10, 10)],
        params(WriteMode::Append, 50),
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT count(*), max(id) FROM t1 WHERE id >= 0").await,
        vec![10, 9]
    );
}

/// The scan node carries everything a remote executor needs as plain data:
/// URI, pinned version, fragment ids per partition, columns, filter, limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scan_node_is_plain_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_, ctx) = numbers_table(&dir, 3).await;
    ctx.sql("SET lance.pushdown_filters = true").await.unwrap();

    let scan = |plan: Arc<dyn ExecutionPlan>| -> Option<Arc<dyn ExecutionPlan>> {
        let mut stack = vec![plan];
        while let Some(node) = stack.pop() {
            if node.downcast_ref::<LanceScanExec>().is_some() {
                return Some(node);
            }
            stack.extend(node.children().into_iter().cloned());
        }
        None
    };

    let plan = ctx
        .sql("SELECT s, id FROM t WHERE id < 120")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let node = scan(plan).expect("a LanceScanExec in the plan");
    let node = node.downcast_ref::<LanceScanExec>().unwrap();
    assert!(
        node.display_uri().ends_with("t.lance"),
        "{}",
        node.display_uri()
    );
    assert_eq!(node.version(), 1);
    let groups = node.fragment_groups();
    assert_eq!(groups.len(), 3, "{groups:?}");
    let mut ids: Vec<u64> = groups.concat();
    ids.sort_unstable();
    assert_eq!(ids, (0..8).collect::<Vec<u64>>());
    let mut columns = node.columns().to_vec();
    columns.sort();
    assert_eq!(columns, ["id", "s"]);
    assert_eq!(
        node.filter().map(ToString::to_string).as_deref(),
        Some("id < Int64(120)")
    );
    assert_eq!(node.limit(), None);

    let plan = ctx
        .sql("SELECT id FROM t LIMIT 7")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let node = scan(plan).expect("a LanceScanExec in the plan");
    let node = node.downcast_ref::<LanceScanExec>().unwrap();
    assert_eq!(node.columns(), ["id"]);
    assert_eq!(node.filter(), None);
    assert_eq!(node.limit(), Some(7));
}

/// Another process commits while a statement is being planned — after the
/// statement looked up the table's latest version once, before the rest of
/// its references to the table were planned. Every reference still reads
/// the one version: two names for the table, a self-join and scalar
/// subqueries all agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_during_planning_does_not_split_a_statement() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 400)],
        params(WriteMode::Create, 50),
    )
    .await;
    let faults = FaultInjector::new();
    let store = faults.params();
    let ctx = context(4, &private_cache());
    for name in ["t", "t2"] {
        let provider = LanceTableProvider::builder(&uri)
            .with_name(name)
            .with_store_params(store.clone())
            .build()
            .await
            .unwrap();
        ctx.register_table(name, Arc::new(provider)).unwrap();
    }
    // Another process appends 100 rows (version 2). The statement looks up
    // the latest version and starts reading its manifest; before that read
    // proceeds, the other process appends 100 more (version 3).
    append_elsewhere(&uri, 400, 100);
    let other = uri.clone();
    let version_2 = format!("_versions/{}.manifest", u64::MAX - 2);
    faults.before_call("get_opts", version_2.leak(), 1, None, 1, move || {
        append_elsewhere(&other, 500, 100)
    });
    let df = ctx
        .sql(
            "SELECT (SELECT count(*) FROM t) AS a, (SELECT count(*) FROM t2) AS b, \
             (SELECT count(*) FROM t x JOIN t y ON x.id = y.id) AS c",
        )
        .await
        .unwrap();
    let plan = df.create_physical_plan().await.unwrap();
    // (The counts come from the scans' statistics; the join's scans remain.)
    let versions = scan_versions(&plan);
    assert_eq!(versions.len(), 2, "{versions:?}");
    let rows = collect(plan, ctx.task_ctx()).await.unwrap();
    let counts = crate::support::sorted_rows(&rows);
    assert_eq!(
        counts,
        ["500|500|500"],
        "one version for the whole statement"
    );
    assert!(versions.iter().all(|&v| v == 2), "{versions:?}");

    // The other process's commit happened; the next statement sees it.
    assert_eq!(
        ints(
            &ctx,
            "SELECT (SELECT count(*) FROM t) AS a, (SELECT count(*) FROM t2) AS b"
        )
        .await,
        vec![600, 600]
    );
    assert_eq!(faults.hooks_run(), 1, "the competing commit ran");
}

/// The version of every Lance scan in `plan` (scalar subqueries included).
fn scan_versions(plan: &Arc<dyn ExecutionPlan>) -> Vec<u64> {
    let text = datafusion::physical_plan::displayable(plan.as_ref())
        .indent(true)
        .to_string();
    text.lines()
        .filter_map(|line| {
            let rest = line.split("LanceScanExec:").nth(1)?;
            let version = rest.split("version=").nth(1)?.split(',').next()?;
            version.trim().parse().ok()
        })
        .collect()
}

/// Another process moves a tag and removes a version; a table registered in
/// this process afterwards follows the tag to its new version, and a removed
/// version fails naming it — nothing about where a pin points is cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_and_versions_are_resolved_at_registration() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "versions.lance");
    crate::fixtures::versions(&uri).await; // v1..v4, tag 'second' -> v2
    let ctx = context(2, &private_cache());
    let register = |name: &str, option: &str, value: &str| {
        format!(
            "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.{option}' '{value}')"
        )
    };
    ctx.sql(&register("tag_before", "tag", "second"))
        .await
        .unwrap();
    ctx.sql(&register("v1_before", "version", "1"))
        .await
        .unwrap();
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM tag_before").await,
        vec![20]
    );

    // Elsewhere: the tag moves to version 3, version 1 is cleaned up.
    let mut other = lance::Dataset::open(&uri).await.unwrap();
    other.tags().update("second", 3u64).await.unwrap();
    other
        .cleanup_old_versions(chrono::Duration::zero(), Some(true), Some(false))
        .await
        .unwrap();
    other = lance::Dataset::open(&uri).await.unwrap();
    assert!(
        other.checkout_version(1).await.is_err(),
        "version 1 is gone"
    );

    ctx.sql(&register("tag_after", "tag", "second"))
        .await
        .unwrap();
    assert_eq!(ints(&ctx, "SELECT count(*) FROM tag_after").await, vec![30]);
    let err = ctx
        .sql(&register("v1_after", "version", "1"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("version 1 does not exist in the Lance dataset at")
            && err.contains("(latest version: 4)"),
        "{err}"
    );
    let err = ctx
        .sql(&register("gone", "tag", "no_such_tag"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("tag 'no_such_tag' does not exist"), "{err}");
    // The table registered before the move keeps the version it resolved.
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM tag_before").await,
        vec![20]
    );
}
