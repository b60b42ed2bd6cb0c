//! Commits under write load: a statement whose commit keeps losing races to
//! another writer retries within its commit budget (`lance.commit_*`), and a
//! spent budget is a plain error that names the table — nothing committed.
//!
//! The other writer is forced between every commit attempt of the statement:
//! a store hook runs it just before the statement writes its manifest.

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use datafusion_lance::LanceTableProvider;
use lance::dataset::WriteMode;

use crate::fixtures::{numbers_batch, params, write};
use crate::support::faults::FaultInjector;
use crate::support::{append_elsewhere, context, dataset_path, ints, private_cache, sorted_rows};

/// `t` (400 numbers rows) registered through `faults`; every commit attempt
/// of a statement on `t` loses to another process's append, `conflicts`
/// times in all.
async fn contended_table(
    dir: &tempfile::TempDir,
    conflicts: usize,
) -> (String, SessionContext, FaultInjector) {
    let uri = dataset_path(dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 400)],
        params(WriteMode::Create, 100),
    )
    .await;
    let faults = FaultInjector::new();
    let ctx = context(2, &private_cache());
    let provider = LanceTableProvider::builder(&uri)
        .with_name("t")
        .with_store_params(faults.params())
        .build()
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(provider)).unwrap();
    let (other, next) = (
        uri.clone(),
        Arc::new(std::sync::atomic::AtomicI64::new(1000)),
    );
    faults.before_call("put", ".manifest", 1, Some(1), conflicts, move || {
        let start = next.fetch_add(10, std::sync::atomic::Ordering::SeqCst);
        append_elsewhere(&other, start, 10)
    });
    (uri, ctx, faults)
}

async fn version(uri: &str) -> u64 {
    lance::Dataset::open(uri).await.unwrap().version_id()
}

/// Each statement kind commits after losing 6 races when its budget allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_retries_within_its_commit_budget() {
    let statements = [
        ("DELETE", "DELETE FROM t WHERE id < 100", 300),
        ("UPDATE", "UPDATE t SET v = 0 WHERE id < 100", 400),
        (
            "INSERT",
            "INSERT INTO t SELECT * FROM t WHERE id < 100",
            500,
        ),
    ];
    for (kind, statement, rows_after) in statements {
        let dir = tempfile::tempdir().unwrap();
        let (uri, ctx, faults) = contended_table(&dir, 12).await;
        ctx.sql("SET lance.commit_max_retries = 20").await.unwrap();
        ctx.sql(statement)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{kind} should commit after 12 lost races: {e}"));
        assert_eq!(faults.hooks_run(), 12, "{kind}: the races happened");
        // 12 appends of 10 rows by the other writer, then the statement.
        assert_eq!(version(&uri).await, 1 + 12 + 1, "{kind}");
        assert_eq!(
            ints(&ctx, "SELECT count(*) FROM t").await,
            vec![rows_after + 120],
            "{kind}: the other writer's rows and the statement's effect"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spent_commit_budget_is_a_plain_error_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, ctx, faults) = contended_table(&dir, 100).await;
    ctx.sql("SET lance.commit_max_retries = 4").await.unwrap();
    let err = ctx
        .sql("DELETE FROM t WHERE id < 100")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    let lost = faults.hooks_run();
    assert_eq!(lost, 4, "one lost race per attempt: {err}");
    assert!(
        err.contains("table 't': gave up committing after")
            && err.contains(&format!(
                "({lost} commits landed since this statement read version 1; budget: 4 \
                 attempts, 30000 ms)"
            ))
            && err.contains("nothing was committed")
            && err.contains("SET lance.commit_max_retries / lance.commit_retry_timeout_ms"),
        "{err}"
    );
    assert!(
        !err.contains(".rs:"),
        "no source paths in the message: {err}"
    );
    // Only the other writer's versions; every original row is still there.
    assert_eq!(version(&uri).await, 1 + lost as u64);
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t WHERE id < 100").await,
        vec![100]
    );
}

/// Another writer appends (and commits) while `lance_optimize` compacts —
/// just before its commit: the compaction commits after it and loses
/// nothing; every row of both is there once, the appended fragment untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_append_during_an_optimize_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, ctx, faults) = contended_table(&dir, 0).await;
    // Lance's compaction commits twice (ReserveFragments, then Rewrite): the
    // other writer commits just before the Rewrite.
    let other = uri.clone();
    faults.before_call("put", ".manifest", 2, None, 1, move || {
        append_elsewhere(&other, 1000, 10)
    });
    let batches = ctx
        .sql("SELECT * FROM lance_optimize('t')")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        faults.hooks_run(),
        1,
        "the other writer committed meanwhile"
    );
    // 4 fragments of 100 rows compacted into 1: version 2 reserves fragment
    // ids, version 3 is the other writer's append, version 4 the rewrite.
    assert_eq!(sorted_rows(&batches), vec!["4|1|4|1|0|4"]);
    assert_eq!(
        sorted_rows(
            &ctx.sql("SELECT version, operation FROM lance_versions('t') WHERE version > 1")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap()
        ),
        vec!["2|ReserveFragments", "3|Append", "4|Rewrite"]
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id), max(id) FROM t").await,
        vec![410, 410, 1009]
    );
    let ds = lance::Dataset::open(&uri).await.unwrap();
    let mut sizes: Vec<_> = ds
        .get_fragments()
        .iter()
        .map(|f| f.metadata().physical_rows)
        .collect();
    sizes.sort();
    assert_eq!(sizes, vec![Some(10), Some(400)]);
}
