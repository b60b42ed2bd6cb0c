//! Snapshot pinning: one version per query, whatever writers do meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::physical_plan::{
    ExecutionPlan, ExecutionPlanProperties, collect, execute_stream_partitioned,
};
use datafusion::prelude::SessionContext;
use datafusion_lance::LanceScanExec;
use futures::TryStreamExt;
use lance::dataset::WriteMode;

use crate::fixtures::{numbers_batch, params, write};
use crate::util::{context, dataset_path, ints, private_cache};

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
    assert!(node.uri().ends_with("t.lance"), "{}", node.uri());
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
