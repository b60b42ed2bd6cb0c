//! Reads under faults: transient object-store errors are retried or
//! reported — never rows silently lost — and corrupt metadata is an error,
//! never read as data.

use crate::support::faults::Fault;
use crate::support::faults::FaultInjector;
use crate::support::faults::faulty_table;
use crate::support::{context, dataset_path, ints, ok, private_cache, referenced_files, sql};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_read_faults_never_lose_rows() {
    let uri = "shared-memory://read-faults/t.lance";
    let ctx = context(3, &private_cache());
    let faults = FaultInjector::new();
    faulty_table(&ctx, uri, &faults).await;
    ok(&ctx, "SET lance.max_rows_per_file = 10").await;
    ok(
        &ctx,
        "INSERT INTO ft SELECT value, 1, 'x' FROM generate_series(100, 999)",
    )
    .await;
    let expected = ints(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0").await;
    assert_eq!(expected, vec![1000, 999 * 1000 / 2]);
    assert!(
        !faults.calls("/data/").is_empty(),
        "reads go through the wrapper"
    );
    // a slow store changes nothing
    faults.delay("get_ranges", "/data/", 2);
    for round in 0..6 {
        // the first reads of data files fail, a few at a time
        for operation in ["get_opts", "get_ranges"] {
            faults.fail(Fault {
                operation,
                pattern: "/data/",
                skip: round,
                times: 1 + round % 3,
                shared: None,
            });
        }
        match sql(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0").await {
            Ok(batches) => {
                let got = crate::support::sorted_rows(&batches);
                assert_eq!(
                    got,
                    vec![format!("{}|{}", expected[0], expected[1])],
                    "round {round}"
                );
            }
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("/data/") && text.contains(".lance"),
                    "round {round}: the error names no data file: {text}"
                );
            }
        }
        faults.clear();
    }
    // One data file that can never be read: an error naming it, never a short result.
    let victim = referenced_files(uri)
        .await
        .into_iter()
        .find(|f| f.starts_with("data/"))
        .unwrap();
    let pattern: &'static str = Box::leak(format!("/{victim}").into_boxed_str());
    faults.fail(Fault::always("get_opts", pattern));
    faults.fail(Fault::always("get_ranges", pattern));
    let err = sql(&ctx, "SELECT count(*), sum(id) FROM ft WHERE v >= 0")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("injected fault"), "{err}");
    assert!(err.contains(&victim), "the error names no file: {err}");
    assert!(faults.injected() > 0);
    faults.clear();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_metadata_is_reported_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(0, 99)",
    )
    .await;
    ok(&ctx, &format!(
        "CREATE EXTERNAL TABLE t2 STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.version' '2')"
    ))
    .await;
    ok(
        &ctx,
        "INSERT INTO t SELECT value FROM generate_series(100, 199)",
    )
    .await;
    let manifests = |uri: &str| -> Vec<std::path::PathBuf> {
        let mut m: Vec<_> = std::fs::read_dir(format!("{uri}/_versions"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "manifest"))
            .collect();
        m.sort();
        m
    };
    // V2 manifest names sort newest first.
    let latest = manifests(&uri)[0].clone();

    // 1. a truncated latest manifest: an error naming the file, no panic
    let bytes = std::fs::read(&latest).unwrap();
    std::fs::write(&latest, &bytes[..bytes.len() / 2]).unwrap();
    let fresh = context(2, &private_cache());
    let err = sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE c STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("manifest") || err.contains("_versions"),
        "{err}"
    );
    // the pinned older version still reads
    assert_eq!(
        ints(&ctx, "SELECT count(*), sum(id) FROM t2 WHERE id >= 0").await,
        vec![100, 4950]
    );
    std::fs::write(&latest, &bytes).unwrap();

    // 2. garbage at a new manifest location
    let garbage = latest.with_file_name("18446744073709551611.manifest");
    std::fs::write(&garbage, b"this is not a manifest").unwrap();
    let fresh = context(2, &private_cache());
    let err = sql(
        &fresh,
        &format!("CREATE EXTERNAL TABLE c STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("manifest") || err.contains("_versions"),
        "{err}"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t2 WHERE id >= 0").await,
        vec![100]
    );
    std::fs::remove_file(&garbage).unwrap();

    // 3. a referenced data file deleted: the scan fails naming it
    let victim = referenced_files(&uri)
        .await
        .into_iter()
        .find(|f| f.starts_with("data/"))
        .unwrap();
    std::fs::remove_file(format!("{uri}/{victim}")).unwrap();
    let fresh = context(2, &private_cache());
    ok(
        &fresh,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let err = sql(&fresh, "SELECT sum(id) FROM t WHERE id >= 0")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&victim), "the error names no file: {err}");
    // no write happened anywhere
    assert_eq!(manifests(&uri).len(), 3);
}
