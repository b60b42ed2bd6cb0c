//! **statements** — the per-statement cost of a vector search (the search
//! section's 200,000 × 64 table, IVF_PQ, `nprobes=8`, k = 10):
//!
//! * the plain statement, the same search prepared (`EXECUTE` with `k`, and
//!   with the query vector, as parameters), DataFusion's floor (`SELECT 1`
//!   through the same front door, and through DataFusion's own
//!   `SessionContext::sql`) and Lance's `Scanner::nearest`, each
//!   interleaved;
//! * 8 concurrent clients on one context vs 8 concurrent
//!   `Scanner::nearest` calls and 8 clients running `SELECT 1`: queries per
//!   second, and the most a statement costing the floor plus Lance's search
//!   can reach;
//! * the whole statement at 1,000,000 × 128 (IVF_PQ, 256 partitions,
//!   16 sub-vectors, `nprobes=20`) vs `Scanner::nearest`.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    FixedSizeListArray, Float32Array, Int64Array, RecordBatch, RecordBatchIterator,
};
use arrow::datatypes::{DataType, Field, Schema};
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};

use crate::common::{Args, Stats, exists, interleaved, ratio, side};
use crate::search::{DIM, context, count, gauss, run, vector_dataset, vector_literal};

/// Concurrent clients, and the searches each runs per round.
const CLIENTS: usize = 8;
const PER_CLIENT: usize = 25;

/// The large table's rows and dimension.
const LARGE_ROWS: usize = 1_000_000;
const LARGE_DIM: usize = 128;

async fn nearest(ds: &Dataset, q: &[f32]) {
    nearest_probing(ds, q, 8).await
}

async fn nearest_probing(ds: &Dataset, q: &[f32], nprobes: usize) {
    let mut scanner = ds.scan();
    scanner.project(&["id"]).expect("project");
    scanner
        .nearest("emb", &Float32Array::from(q.to_vec()), 10)
        .expect("nearest")
        .nprobes(nprobes);
    assert_eq!(count(&scanner).await, 10);
}

pub(crate) async fn statements_table(args: &Args) {
    let ctx = context();
    let uri = vector_dataset(args, &ctx).await;
    let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
    let q: Vec<f32> = (0..DIM as u64).map(|i| gauss(1 << 40 | i)).collect();
    let literal = vector_literal(&q);
    let plain = format!(
        "SELECT id, _distance FROM lance_vector_search('v', 'emb', {literal}, 10, 'nprobes=8')"
    );
    run(
        &ctx,
        &format!(
            "PREPARE by_k(BIGINT) AS SELECT id, _distance FROM lance_vector_search('v', 'emb', \
             {literal}, $1, 'nprobes=8')"
        ),
    )
    .await;
    run(
        &ctx,
        "PREPARE by_vector AS SELECT id, _distance FROM lance_vector_search('v', 'emb', $1, 10, \
         'nprobes=8')",
    )
    .await;
    let by_vector = format!("EXECUTE by_vector({literal})");
    let statement = |sql: String, rows: usize| {
        let ctx = ctx.clone();
        side(move || {
            let (ctx, sql) = (ctx.clone(), sql.clone());
            async move {
                assert_eq!(run(&ctx, &sql).await, rows);
            }
        })
    };
    let mut sides = vec![
        statement(plain.clone(), 10),
        statement("EXECUTE by_k(10)".to_string(), 10),
        statement(by_vector, 10),
        statement("SELECT 1".to_string(), 1),
        {
            let (ds, q) = (Arc::clone(&ds), q.clone());
            side(move || {
                let (ds, q) = (Arc::clone(&ds), q.clone());
                async move { nearest(&ds, &q).await }
            })
        },
        {
            // DataFusion's own floor, without the front door.
            let ctx = ctx.clone();
            side(move || {
                let ctx = ctx.clone();
                async move {
                    let batches = ctx.sql("SELECT 1").await.expect("plan");
                    assert_eq!(batches.collect().await.expect("run").len(), 1);
                }
            })
        },
    ];
    let s = interleaved(args.iters, &mut sides).await;
    println!(
        "\n## Statements: one top-10 vector search (200,000 × {DIM}, IVF_PQ, nprobes 8), plain \
         and prepared\n"
    );
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores. Ratios: time ÷ Lance's \
         `Scanner::nearest`; the last column takes DataFusion's floor (`SELECT 1` through the \
         same front door) off the statement first.\n",
        args.iters
    );
    println!("| statement | time in ms | ÷ Lance | (time − SELECT 1) ÷ Lance |");
    println!("|---|---|---|---|");
    let labels = [
        "`SELECT … FROM lance_vector_search('v', 'emb', [64 floats], 10, 'nprobes=8')`",
        "`EXECUTE by_k(10)` (k a parameter)",
        "`EXECUTE by_vector([64 floats])` (the vector a parameter)",
        "`SELECT 1`",
        "Lance `Scanner::nearest`, nprobes 8",
        "`SELECT 1` through DataFusion's `SessionContext::sql` (no front door)",
    ];
    // The floor taken off the searches through SQL only.
    print_rows(&labels, &s, 0..=2, 3, 4);
    concurrent_table(args, &ctx, &plain, &ds, &q).await;
    large_table(args).await;
}

/// The 1,000,000 × 128 table with its IVF_PQ index (written once, then
/// reused), registered in `ctx` as `big`; its location.
async fn large_dataset(args: &Args, ctx: &datafusion::prelude::SessionContext) -> String {
    let path = args
        .dir
        .join(format!("search-vectors-{LARGE_ROWS}x{LARGE_DIM}.lance"));
    let uri = path.to_string_lossy().to_string();
    let register = format!("CREATE EXTERNAL TABLE big STORED AS LANCE LOCATION '{uri}'");
    if exists(&path) {
        run(ctx, &register).await;
        return uri;
    }
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "emb",
            DataType::FixedSizeList(Arc::clone(&item), LARGE_DIM as i32),
            true,
        ),
    ]));
    const BATCH: usize = 100_000;
    let (item_of, schema_of) = (Arc::clone(&item), Arc::clone(&schema));
    let batches = (0..LARGE_ROWS / BATCH).map(move |b| {
        let rows = (b * BATCH) as u64..((b + 1) * BATCH) as u64;
        let values = (rows.start * LARGE_DIM as u64..rows.end * LARGE_DIM as u64).map(gauss);
        let emb = FixedSizeListArray::try_new(
            Arc::clone(&item_of),
            LARGE_DIM as i32,
            Arc::new(Float32Array::from_iter_values(values)),
            None,
        )?;
        RecordBatch::try_new(
            Arc::clone(&schema_of),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.map(|i| i as i64))),
                Arc::new(emb),
            ],
        )
    });
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: LARGE_ROWS,
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new(batches, Arc::clone(&schema)),
        &uri,
        Some(params),
    )
    .await
    .expect("write");
    run(ctx, &register).await;
    run(
        ctx,
        "CREATE INDEX big_pq ON big USING IVF_PQ (emb) WITH (num_partitions = 256, \
         num_sub_vectors = 16)",
    )
    .await;
    uri
}

/// One search statement at 1,000,000 × 128 against `Scanner::nearest`, the
/// whole statement (the goal: ≤ 1.15×).
pub(crate) async fn large_table(args: &Args) {
    let ctx = context();
    let uri = large_dataset(args, &ctx).await;
    let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
    let q: Vec<f32> = (0..LARGE_DIM as u64).map(|i| gauss(1 << 41 | i)).collect();
    let plain = format!(
        "SELECT id, _distance FROM lance_vector_search('big', 'emb', {}, 10, 'nprobes=20')",
        vector_literal(&q)
    );
    let mut sides = vec![
        {
            let (ctx, plain) = (ctx.clone(), plain.clone());
            side(move || {
                let (ctx, plain) = (ctx.clone(), plain.clone());
                async move { assert_eq!(run(&ctx, &plain).await, 10) }
            })
        },
        {
            let ctx = ctx.clone();
            side(move || {
                let ctx = ctx.clone();
                async move { assert_eq!(run(&ctx, "SELECT 1").await, 1) }
            })
        },
        {
            let (ds, q) = (Arc::clone(&ds), q.clone());
            side(move || {
                let (ds, q) = (Arc::clone(&ds), q.clone());
                async move { nearest_probing(&ds, &q, 20).await }
            })
        },
    ];
    let s = interleaved(args.iters, &mut sides).await;
    println!(
        "\n## Statements at {LARGE_ROWS} × {LARGE_DIM} (IVF_PQ, 256 partitions, 16 sub-vectors, \
         nprobes 20, k = 10)\n"
    );
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores. Ratios: time ÷ Lance's \
         `Scanner::nearest`, the whole statement, then with DataFusion's floor (`SELECT 1`) \
         taken off it.\n",
        args.iters
    );
    println!("| statement | time in ms | ÷ Lance | (time − SELECT 1) ÷ Lance |");
    println!("|---|---|---|---|");
    let labels = [
        "`SELECT … FROM lance_vector_search('big', 'emb', [128 floats], 10, 'nprobes=20')`",
        "`SELECT 1`",
        "Lance `Scanner::nearest`, nprobes 20",
    ];
    print_rows(&labels, &s, 0..=0, 1, 2);
}

/// One table row per side: time, ratio to side `lance`, and for the
/// `searches` the ratio with side `floor`'s median (`SELECT 1`) taken off.
fn print_rows(
    labels: &[&str],
    s: &[Stats],
    searches: std::ops::RangeInclusive<usize>,
    floor: usize,
    lance: usize,
) {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    for (i, (label, stats)) in labels.iter().zip(s).enumerate() {
        let less_floor = match searches.contains(&i) {
            true => format!(
                "{:.2}×",
                (ms(stats.median) - ms(s[floor].median)) / ms(s[lance].median)
            ),
            false => "—".to_string(),
        };
        println!(
            "| {label} | {:.2} ({:.2}–{:.2}) / {:.1} | {} | {less_floor} |",
            ms(stats.median),
            ms(stats.min),
            ms(stats.max),
            stats.cores,
            ratio(stats, &s[lance]),
        );
    }
}

/// `CLIENTS` concurrent clients, each running `PER_CLIENT` searches (or
/// `SELECT 1`s).
async fn concurrent_table(
    args: &Args,
    ctx: &datafusion::prelude::SessionContext,
    plain: &str,
    ds: &Arc<Dataset>,
    q: &[f32],
) {
    let sql_round = |sql: &str, rows: usize| {
        let ctx = ctx.clone();
        let sql = sql.to_string();
        side(move || {
            let (ctx, sql) = (ctx.clone(), sql.clone());
            async move {
                let clients: Vec<_> = (0..CLIENTS)
                    .map(|_| {
                        let (ctx, sql) = (ctx.clone(), sql.clone());
                        tokio::spawn(async move {
                            for _ in 0..PER_CLIENT {
                                assert_eq!(run(&ctx, &sql).await, rows);
                            }
                        })
                    })
                    .collect();
                for c in clients {
                    c.await.expect("client");
                }
            }
        })
    };
    let lance_round = || {
        let (ds, q) = (Arc::clone(ds), q.to_vec());
        side(move || {
            let (ds, q) = (Arc::clone(&ds), q.clone());
            async move {
                let clients: Vec<_> = (0..CLIENTS)
                    .map(|_| {
                        let (ds, q) = (Arc::clone(&ds), q.clone());
                        tokio::spawn(async move {
                            for _ in 0..PER_CLIENT {
                                nearest(&ds, &q).await;
                            }
                        })
                    })
                    .collect();
                for c in clients {
                    c.await.expect("client");
                }
            }
        })
    };
    let started = Instant::now();
    let mut sides = vec![
        sql_round(plain, 10),
        lance_round(),
        sql_round("SELECT 1", 1),
    ];
    let s: Vec<Stats> = interleaved(args.iters, &mut sides).await;
    let queries = (CLIENTS * PER_CLIENT) as f64;
    let qps = |stats: &Stats| queries / stats.median.as_secs_f64();
    println!(
        "\n{CLIENTS} concurrent clients, {PER_CLIENT} searches each per run ({} interleaved runs, \
         {:.0} s in all). Ratio: queries per second ÷ Lance's.\n",
        args.iters,
        started.elapsed().as_secs_f64()
    );
    println!("| clients | run time | queries/s | ÷ Lance's queries/s |");
    println!("|---|---|---|---|");
    for (label, stats) in [
        "datafusion-lance: lance_vector_search on one context",
        "Lance: Scanner::nearest on one Dataset",
        "DataFusion's floor: `SELECT 1` through the same front door",
    ]
    .iter()
    .zip(&s)
    {
        println!(
            "| {label} | {} | {:.0} | {:.2}× |",
            stats.cell(),
            qps(stats),
            qps(stats) / qps(&s[1])
        );
    }
    // With the cores busy, a statement costs at least the floor's CPU time
    // plus Lance's search's: its queries/s is at most 1 / (1/floor + 1/Lance).
    let (floor, lance) = (qps(&s[2]), qps(&s[1]));
    println!(
        "\nThe most a statement that costs DataFusion's floor plus Lance's search can reach: \
         1 / (1/{floor:.0} + 1/{lance:.0}) = {:.0} queries/s = **{:.2}×** Lance's.",
        1.0 / (1.0 / floor + 1.0 / lance),
        floor / (floor + lance)
    );
}
