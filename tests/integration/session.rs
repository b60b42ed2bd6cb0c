//! The shared Lance session: one manifest cached however many contexts open a
//! table; concurrent cold opens load once; the escape hatch restores
//! per-open sessions.

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use lance::dataset::WriteMode;
use tokio::sync::Barrier;

use crate::fixtures::{numbers_batch, params, write};
use crate::support::{context, dataset_path, ints, private_cache};
use datafusion_lance::VersionSpec;
use datafusion_lance::storage::normalize_uri;
use datafusion_lance::storage::{session_sharing_disabled, store_params};
use datafusion_lance::{LanceSessionCache, LanceTableProvider};

async fn register(ctx: &SessionContext, uri: &str) {
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k_contexts_cache_one_manifest() {
    if session_sharing_disabled() {
        return; // this process runs the escape-hatch child test
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 500)],
        params(WriteMode::Create, 50),
    )
    .await;

    let cache = private_cache();
    let empty = cache.session().size_bytes();
    let first = context(2, &cache);
    register(&first, &uri).await;
    assert_eq!(
        ints(&first, "SELECT count(*) FROM t WHERE id >= 0").await,
        vec![500]
    );
    let after_one = cache.session().size_bytes();
    assert!(after_one > empty, "the manifest is cached");
    let loads_after_one = cache.opener_stats().loads;

    for _ in 0..8 {
        let ctx = context(2, &cache);
        register(&ctx, &uri).await;
        assert_eq!(
            ints(&ctx, "SELECT count(*) FROM t WHERE id >= 0").await,
            vec![500]
        );
    }
    assert_eq!(
        cache.session().size_bytes(),
        after_one,
        "no new cache entries"
    );
    assert_eq!(
        cache.opener_stats().loads,
        loads_after_one,
        "no manifest loads"
    );
    assert!(cache.opener_stats().reused >= 16);

    // A new version is loaded once and served to everyone.
    write(
        &uri,
        vec![numbers_batch(500, 10)],
        params(WriteMode::Append, 50),
    )
    .await;
    assert_eq!(
        ints(&first, "SELECT count(*) FROM t WHERE id >= 0").await,
        vec![510]
    );
    assert_eq!(cache.opener_stats().loads, loads_after_one + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_cold_opens_load_each_version_once() {
    if session_sharing_disabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = normalize_uri(&dataset_path(&dir, "t.lance")).unwrap();
    write(
        &uri,
        vec![numbers_batch(0, 500)],
        params(WriteMode::Create, 10),
    )
    .await;
    let cache = private_cache();
    let barrier = Arc::new(Barrier::new(24));
    let tasks: Vec<_> = (0..24)
        .map(|_| {
            let (cache, barrier, uri) = (Arc::clone(&cache), Arc::clone(&barrier), uri.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                cache
                    .open(
                        &uri,
                        &store_params(&Default::default()),
                        &VersionSpec::Latest,
                    )
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut datasets = Vec::new();
    for t in tasks {
        datasets.push(t.await.unwrap());
    }
    let stats = cache.opener_stats();
    assert_eq!(stats.opens, 24);
    assert_eq!(
        stats.loads, 1,
        "one manifest load for 24 racing opens: {stats:?}"
    );
    assert!(datasets.iter().all(|d| Arc::ptr_eq(d, &datasets[0])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_share_the_process_session_by_default() {
    if session_sharing_disabled() {
        return;
    }
    let a = datafusion_lance::lance_session_context(Default::default());
    let b = datafusion_lance::lance_session_context(Default::default());
    let cache_a = LanceSessionCache::for_config(a.state().config());
    let cache_b = LanceSessionCache::for_config(b.state().config());
    assert!(Arc::ptr_eq(&cache_a, &cache_b));
    assert!(cache_a.is_shared());

    // Other budgets select another shared session; equal budgets share it.
    a.sql("SET lance.metadata_cache_bytes = 12345")
        .await
        .unwrap();
    b.sql("SET lance.metadata_cache_bytes = 12345")
        .await
        .unwrap();
    let small_a = LanceSessionCache::for_config(a.state().config());
    let small_b = LanceSessionCache::for_config(b.state().config());
    assert!(!Arc::ptr_eq(&small_a, &cache_a));
    assert!(Arc::ptr_eq(&small_a, &small_b));
    assert_eq!(small_a.budgets().unwrap().metadata_bytes, 12345);
}

/// Runs `escape_hatch_child` in a child process with the escape hatch set.
#[test]
fn escape_hatch_restores_per_open_sessions() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "session::escape_hatch_child",
            "--include-ignored",
            "--nocapture",
        ])
        .env("DATAFUSION_LANCE_SHARE_SESSION", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "child did not run:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by escape_hatch_restores_per_open_sessions with DATAFUSION_LANCE_SHARE_SESSION=0"]
async fn escape_hatch_child() {
    assert!(session_sharing_disabled());
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    write(
        &uri,
        vec![numbers_batch(0, 100)],
        params(WriteMode::Create, 50),
    )
    .await;
    let cache = private_cache();
    let empty = cache.session().size_bytes();
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let provider = LanceTableProvider::builder(&uri)
            .with_session_cache(Arc::clone(&cache))
            .build()
            .await
            .unwrap();
        let ctx = context(2, &cache);
        ctx.register_table("t", Arc::new(provider)).unwrap();
        assert_eq!(
            ints(&ctx, "SELECT count(*) FROM t WHERE id >= 0").await,
            vec![100]
        );
        let ds = cache
            .open(
                &normalize_uri(&uri).unwrap(),
                &Default::default(),
                &VersionSpec::Latest,
            )
            .await
            .unwrap();
        sessions.push(ds.session());
    }
    assert_eq!(
        cache.session().size_bytes(),
        empty,
        "the shared session is not used"
    );
    assert_eq!(cache.opener_stats().reused, 0, "no open reuses another");
    assert!(
        !Arc::ptr_eq(&sessions[0], &sessions[1]),
        "each open has its own session"
    );
    assert!(!Arc::ptr_eq(&sessions[1], &sessions[2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_version_is_served_without_loading_it_again() {
    if session_sharing_disabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let cache = private_cache();
    let ctx = context(2, &cache);
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"
    ))
    .await
    .unwrap();
    for k in 0..3 {
        ctx.sql(&format!("INSERT INTO t VALUES ({k})"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let before = cache.opener_stats();
        assert_eq!(
            ints(&ctx, "SELECT count(*) FROM t WHERE id >= 0").await,
            vec![k + 1]
        );
        let after = cache.opener_stats();
        assert_eq!(
            after.loads, before.loads,
            "the new version was not loaded again"
        );
        assert_eq!(
            after.reused,
            before.reused + 1,
            "the committed dataset was reused"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registering_twice_is_harmless() {
    let ctx = datafusion_lance::lance_session_context(Default::default());
    let rules = ctx.state().analyzer().rules.len();
    datafusion_lance::register_lance(&ctx).unwrap();
    assert_eq!(ctx.state().analyzer().rules.len(), rules);
}
