//! The fake LanceDB Cloud service speaks the dialect of LanceDB's own
//! client: `tests/integration/lancedb/lancedb_client.py` (PyPI `lancedb`,
//! installed by `.ci/ensure-lancedb.sh`) opens, counts, queries, adds and
//! merges through it, and each side reads what the other wrote.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cloud::setup;
use crate::fake_cloud::{API_KEY, FakeCloud};
use crate::support::{ok, try_rows};

/// The longest the client may take for one step.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs the client's `step` against `fake` (on a blocking thread: the fake
/// answers on the test's runtime meanwhile) and returns what it printed.
async fn client(fake: &FakeCloud, step: &'static str) -> Value {
    let url = fake.url();
    tokio::task::spawn_blocking(move || {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/lancedb/lancedb_client.py"
        );
        let mut out = tempfile::tempfile().unwrap();
        let mut err = tempfile::tempfile().unwrap();
        let mut child = Command::new(std::env::var("PYTHON").unwrap_or("python3".into()))
            .args([script, &url, API_KEY, step])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(err.try_clone().unwrap())
            .spawn()
            .expect("python3 runs LanceDB's client");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!("LanceDB's client took more than {DEADLINE:?} for '{step}'");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |file: &mut std::fs::File| {
            use std::io::Seek;
            file.rewind().unwrap();
            let mut text = String::new();
            file.read_to_string(&mut text).unwrap();
            text
        };
        let (stdout, stderr) = (read(&mut out), read(&mut err));
        assert!(
            status.success(),
            "LanceDB's client failed at '{step}' (pip install lancedb):\n{stderr}"
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    })
    .await
    .unwrap()
}

async fn one(ctx: &datafusion::prelude::SessionContext, query: &str) -> String {
    try_rows(ctx, query).await.unwrap().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedbs_own_client_and_this_crate_read_each_others_writes() {
    let (fake, ctx) = setup().await;

    // LanceDB's client reads the table as SQL does.
    let seen = client(&fake, "read").await;
    assert_eq!(
        seen["count"].to_string(),
        one(&ctx, "SELECT count(*) FROM cloud").await
    );
    assert_eq!(
        seen["filtered"].to_string(),
        one(&ctx, "SELECT count(*) FROM cloud WHERE id < 100").await
    );
    let rows: Vec<String> = seen["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = r["s"].as_str().map_or("NULL".to_string(), str::to_string);
            format!("{}|{s}", r["id"])
        })
        .collect();
    assert_eq!(
        rows,
        try_rows(&ctx, "SELECT id, s FROM cloud WHERE id < 10 ORDER BY id")
            .await
            .unwrap()
    );

    // What SQL writes, the client reads.
    ok(
        &ctx,
        "INSERT INTO cloud VALUES (2000, 1.5, 'from sql', true, DATE '2020-01-01')",
    )
    .await;
    let seen = client(&fake, "read").await;
    assert_eq!(
        seen["count"].to_string(),
        one(&ctx, "SELECT count(*) FROM local").await
    );
    assert_eq!(
        seen["version"].to_string(),
        one(&ctx, "SELECT max(version) FROM lance_versions('local')").await
    );

    // What the client adds and merges, SQL reads.
    let before: i64 = one(&ctx, "SELECT max(version) FROM lance_versions('local')")
        .await
        .parse()
        .unwrap();
    let wrote = client(&fake, "write").await;
    assert_eq!(wrote["merged"]["inserted"], 1, "{wrote}");
    assert_eq!(wrote["merged"]["updated"], 3, "{wrote}");
    assert_eq!(wrote["version"], before + 2, "{wrote}");
    assert_eq!(
        try_rows(
            &ctx,
            "SELECT id, v, s, b, d FROM cloud WHERE id >= 3000 OR id IN (1, 2, 3) ORDER BY id"
        )
        .await
        .unwrap(),
        // Sorted as text.
        vec![
            "1|0.5|merged-1|false|2024-01-01",
            "2|1.0|merged-2|true|2024-01-01",
            "3000|1500.0|added-3000|true|2024-01-01",
            "3001|1500.5|added-3001|false|2024-01-01",
            "3002|1501.0|added-3002|true|2024-01-01",
            "3003|1501.5|added-3003|false|2024-01-01",
            "3004|1502.0|added-3004|true|2024-01-01",
            "3|1.5|merged-3|false|2024-01-01",
            "4000|2000.0|merged-4000|true|2024-01-01",
        ]
    );
    println!(
        "checked against LanceDB's Python client {}",
        wrote["client"]
    );
}
