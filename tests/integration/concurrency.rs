//! Concurrent statements: each commits exactly once, the outcome is that of
//! some serial order, and readers only ever see committed states. Every
//! overlap is forced (barriers, statements planned on one version before
//! any runs), never left to timing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use tokio::sync::Barrier;

use crate::support::{
    INITIAL, context, dataset_path, ints, ints_of, planned, private_cache, setup, sql, validates,
    version,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_inserts_each_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(2, &cache);
    let uri = setup(&dir, &ctx).await;
    let v0 = version(&ctx, "t").await;

    // All eight are planned on version v0 before any runs; then they run
    // together: every commit but the first rebases onto the others.
    let mut plans = Vec::new();
    for k in 1..=8i64 {
        let statement = format!(
            "INSERT INTO t SELECT value + {}, 'k{k}' FROM generate_series(0, 999)",
            k * 10_000
        );
        plans.push(planned(&cache, &uri, &statement).await);
    }
    let barrier = Arc::new(Barrier::new(plans.len()));
    let runs: Vec<_> = plans
        .into_iter()
        .map(|(plan, task)| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                datafusion::physical_plan::collect(plan, task).await
            })
        })
        .collect();
    for run in runs {
        assert_eq!(ints_of(&run.await.unwrap().unwrap()), 1000);
    }
    assert_eq!(
        version(&ctx, "t").await,
        v0 + 8,
        "exactly one version per statement"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id) FROM t").await,
        vec![INITIAL + 8000, INITIAL + 8000]
    );
    let appends = ints(
        &ctx,
        &format!(
            "SELECT count(*) FROM lance_versions('t') WHERE version > {v0} AND operation = 'Append'"
        ),
    )
    .await;
    assert_eq!(appends, vec![8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_see_only_committed_states_during_20_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(3, &cache);
    let uri = dataset_path(&dir, "t.lance");
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (cache, uri, done) = (Arc::clone(&cache), uri.clone(), Arc::clone(&done));
        tokio::spawn(async move {
            let ctx = context(2, &cache);
            sql(
                &ctx,
                &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
            )
            .await
            .unwrap();
            for k in 0..20 {
                sql(
                    &ctx,
                    &format!(
                        "INSERT INTO t SELECT value FROM generate_series({}, {})",
                        k * 500,
                        k * 500 + 499
                    ),
                )
                .await
                .unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut observed = BTreeSet::new();
    while !done.load(Ordering::SeqCst) {
        let r = ints(
            &ctx,
            "SELECT count(*) AS n, coalesce(sum(id), 0) AS s FROM t WHERE id >= 0",
        )
        .await;
        let (n, s) = (r[0], r[1]);
        assert_eq!(n % 500, 0, "a partial commit: {n} rows");
        assert_eq!(s, n * (n - 1) / 2, "ids 0..{n} exactly once");
        observed.insert(n);
    }
    writer.await.unwrap();
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![10_000]);
    assert!(!observed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insert_overwrite_racing_insert_is_serializable() {
    // Both statements are planned on the same version, then committed in
    // one order or the other.
    for overwrite_first in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let cache = private_cache();
        let ctx = context(2, &cache);
        let uri = setup(&dir, &ctx).await;
        let v0 = version(&ctx, "t").await;
        let overwrite = planned(
            &cache,
            &uri,
            "INSERT OVERWRITE t SELECT value + 1000, 'o' FROM generate_series(0, 99)",
        )
        .await;
        let insert = planned(
            &cache,
            &uri,
            "INSERT INTO t SELECT value + 2000, 'i' FROM generate_series(0, 99)",
        )
        .await;
        let (first, second) = if overwrite_first {
            (overwrite, insert)
        } else {
            (insert, overwrite)
        };
        datafusion::physical_plan::collect(first.0, first.1)
            .await
            .unwrap();
        let second = datafusion::physical_plan::collect(second.0, second.1).await;
        let rows = ints(
            &ctx,
            "SELECT count(*), count(*) FILTER (WHERE id < 1000), count(*) FILTER (WHERE id >= 2000) FROM t",
        )
        .await;
        if overwrite_first {
            // The INSERT read a version the overwrite replaced: it must not
            // land on the overwritten table.
            let e = second.unwrap_err().to_string();
            assert!(
                e.contains("a concurrent write conflicts with this statement"),
                "{e}"
            );
            assert_eq!(rows, vec![100, 0, 0]);
            assert_eq!(version(&ctx, "t").await, v0 + 1);
        } else {
            // INSERT, then INSERT OVERWRITE: the overwrite replaces both.
            second.unwrap();
            assert_eq!(rows, vec![100, 0, 0]);
            assert_eq!(version(&ctx, "t").await, v0 + 2);
        }
    }
}

/// Concurrent DELETE / UPDATE statements from separate contexts: on disjoint
/// fragments both commit (Lance rebases them); on the same rows one may fail
/// with the conflict error, never both applied twice or half applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deletes_and_updates_are_serializable() {
    let dir = tempfile::tempdir().unwrap();
    let cache = private_cache();
    let ctx = context(2, &cache);
    let uri = setup(&dir, &ctx).await;
    // Two more fragments: ids 1000..1099 and 2000..2099.
    sql(
        &ctx,
        "INSERT INTO t SELECT value, 'a' FROM generate_series(1000, 1099)",
    )
    .await
    .unwrap();
    sql(
        &ctx,
        "INSERT INTO t SELECT value, 'b' FROM generate_series(2000, 2099)",
    )
    .await
    .unwrap();
    let v0 = version(&ctx, "t").await;

    // Disjoint fragments, both statements in flight at once (both planned
    // on the same version before either commits): the second rebases.
    let (a, b) = (
        planned(&cache, &uri, "DELETE FROM t WHERE id BETWEEN 1000 AND 1049").await,
        planned(&cache, &uri, "UPDATE t SET label = 'B' WHERE id >= 2000").await,
    );
    datafusion::physical_plan::collect(a.0, a.1).await.unwrap();
    datafusion::physical_plan::collect(b.0, b.1).await.unwrap();
    assert_eq!(version(&ctx, "t").await, v0 + 2);
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*), count(DISTINCT id), sum(CASE WHEN label = 'B' THEN 1 ELSE 0 END) FROM t"
        )
        .await,
        vec![INITIAL + 150, INITIAL + 150, 100]
    );

    // The same rows, both statements in flight at once: both are planned
    // (reading the same version) before either commits. The first to commit
    // wins; the other fails with the conflict error and changes nothing.
    for (first, second, label_x) in [
        (
            "UPDATE t SET label = 'x' WHERE id >= 1050 AND id < 1075",
            "DELETE FROM t WHERE id >= 1050 AND id < 1075",
            25,
        ),
        (
            "DELETE FROM t WHERE id >= 1075 AND id < 1100",
            "UPDATE t SET label = 'x' WHERE id >= 1075 AND id < 1100",
            0,
        ),
    ] {
        let before = version(&ctx, "t").await;
        let (a, b) = (
            planned(&cache, &uri, first).await,
            planned(&cache, &uri, second).await,
        );
        datafusion::physical_plan::collect(a.0, a.1)
            .await
            .unwrap_or_else(|e| panic!("{first}: {e}"));
        let err = datafusion::physical_plan::collect(b.0, b.1)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "table 't': a concurrent write conflicts with this statement, which was \
                          not committed; retry it"
            ),
            "{second}: {err}"
        );
        assert_eq!(version(&ctx, "t").await, before + 1, "{first} / {second}");
        let range = if label_x == 25 {
            "1050 AND 1074"
        } else {
            "1075 AND 1099"
        };
        let (rows, labelled) = (
            ints(
                &ctx,
                &format!("SELECT count(*) FROM t WHERE id BETWEEN {range}"),
            )
            .await,
            ints(
                &ctx,
                &format!("SELECT count(*) FROM t WHERE id BETWEEN {range} AND label = 'x'"),
            )
            .await,
        );
        // Only the first statement's effect.
        assert_eq!((rows, labelled), (vec![label_x], vec![label_x]), "{first}");
    }
    validates(&uri).await;
}
