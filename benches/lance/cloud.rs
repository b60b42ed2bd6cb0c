//! **cloud** — a `db://` table served by the fake LanceDB Cloud service on
//! 127.0.0.1 (Lance's own REST server over a directory,
//! `tests/common/fake_cloud.rs`) vs the same table read locally: a full scan
//! and the Q6-like query over `--rows` (at most 1,000,000) rows, the
//! requests each statement sends, and an `INSERT` of those rows in
//! 10,000-row requests and in the largest the fake takes (25,000 rows: it
//! keeps axum's 2 MiB body limit) vs into a local table. Requests cross two
//! loopback HTTP hops (the fake's dialect front, then Lance's REST server)
//! with Arrow IPC bodies, so the ratios are the cost of the REST data plane
//! (and of the fake), not of a network.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use datafusion_lance::options::DEFAULT_STORAGE_VERSION;

use crate::common::{Args, interleaved, ratio, side, write_lance};
use crate::fake_cloud::{API_KEY, FakeCloud};
use crate::read::{Q6, config, run_sql};

/// Requests of one statement, by kind: `describe 1, count_rows 1, query 16`.
fn requests(fake: &FakeCloud) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for kind in fake.log() {
        let short = kind
            .trim_end_matches("_table")
            .trim_end_matches("_table_rows");
        *counts.entry(short).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn context(fake: &FakeCloud, path: &str, read_rows: Option<usize>) -> SessionContext {
    let ctx = datafusion_lance::lance_session_context(config(num_cpus()));
    let statement = match read_rows {
        None => format!("CREATE EXTERNAL TABLE lineitem STORED AS LANCE LOCATION '{path}'"),
        Some(rows) => format!(
            "CREATE EXTERNAL TABLE lineitem STORED AS LANCE LOCATION 'db://bench/lineitem' \
             OPTIONS ('api_key' '{API_KEY}', 'host_override' '{}', \
             'read_rows_per_request' '{rows}')",
            fake.url()
        ),
    };
    run_sql(&ctx, &statement).await;
    ctx
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

pub(crate) async fn cloud_table(args: &Args) {
    let rows = args.rows.min(1_000_000);
    let fake = FakeCloud::start().await;
    let path = fake.table_path("lineitem");
    write_lance(&path, rows, 1 << 20, DEFAULT_STORAGE_VERSION).await;
    let local = context(&fake, &path, None).await;
    let remote = context(&fake, &path, Some(65_536)).await;
    let large_pages = context(&fake, &path, Some(1 << 20)).await;

    println!(
        "\n### cloud: {rows} rows through db:// (fake service on 127.0.0.1) vs read locally \
         ({} partitions)\n",
        num_cpus()
    );
    println!(
        "| query | local table | db://, 65,536 rows per request (default) | ratio | db://, \
         1,048,576 rows per request | ratio | requests (default) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let scan = "SELECT * FROM lineitem";
    for (name, sql) in [("full scan", scan), ("Q6-like", Q6)] {
        fake.clear_log();
        let n = run_sql(&remote, sql).await;
        assert_eq!(n, run_sql(&local, sql).await, "{name}: same rows");
        let sent = requests(&fake);
        let mut sides = [
            side(|| async {
                run_sql(&local, sql).await;
            }),
            side(|| async {
                run_sql(&remote, sql).await;
            }),
            side(|| async {
                run_sql(&large_pages, sql).await;
            }),
        ];
        let stats = interleaved(args.iters, &mut sides).await;
        println!(
            "| {name} | {} | {} | {} | {} | {} | {sent} |",
            stats[0].cell(),
            stats[1].cell(),
            ratio(&stats[1], &stats[0]),
            stats[2].cell(),
            ratio(&stats[2], &stats[0]),
        );
    }

    // INSERT of every row into a db:// table in 10,000-row requests (one
    // version each), in the largest requests the fake takes (axum's default
    // body limit, 2 MiB: 25,000 of these rows), and into a local table.
    let writer = datafusion_lance::lance_session_context(config(num_cpus()));
    run_sql(
        &writer,
        &format!("CREATE EXTERNAL TABLE source STORED AS LANCE LOCATION '{path}'"),
    )
    .await;
    let local_sink = fake.table_path("local_sink");
    write_lance(&local_sink, 1, 1 << 20, DEFAULT_STORAGE_VERSION).await;
    run_sql(
        &writer,
        &format!("CREATE EXTERNAL TABLE sink_local STORED AS LANCE LOCATION '{local_sink}'"),
    )
    .await;
    write_lance(
        &fake.table_path("sink"),
        1,
        1 << 20,
        DEFAULT_STORAGE_VERSION,
    )
    .await;
    for per_request in [10_000, 25_000] {
        run_sql(
            &writer,
            &format!(
                "CREATE EXTERNAL TABLE sink_{per_request} STORED AS LANCE LOCATION \
                 'db://bench/sink' OPTIONS ('api_key' '{API_KEY}', 'host_override' '{}', \
                 'write_rows_per_request' '{per_request}')",
                fake.url()
            ),
        )
        .await;
    }
    let insert = |sink: &str| format!("INSERT INTO sink_{sink} SELECT * FROM source");
    let mut sent = Vec::new();
    for sink in ["10000", "25000"] {
        fake.clear_log();
        run_sql(&writer, &insert(sink)).await;
        sent.push(requests(&fake));
    }
    let (here, small, large) = (insert("local"), insert("10000"), insert("25000"));
    let mut sides = [
        side(|| async {
            run_sql(&writer, &here).await;
        }),
        side(|| async {
            run_sql(&writer, &small).await;
        }),
        side(|| async {
            run_sql(&writer, &large).await;
        }),
    ];
    let stats = interleaved(args.iters, &mut sides).await;
    println!(
        "\n| INSERT of {rows} rows | into a local table | db://, 10,000-row requests | ratio | \
         db://, 25,000-row requests | ratio |\n|---|---|---|---|---|---|"
    );
    println!(
        "| time | {} | {} | {} | {} | {} |",
        stats[0].cell(),
        stats[1].cell(),
        ratio(&stats[1], &stats[0]),
        stats[2].cell(),
        ratio(&stats[2], &stats[0]),
    );
    println!("| requests | | {} | | {} | |", sent[0], sent[1]);
}
