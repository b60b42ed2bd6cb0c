//! **search** — searches through SQL against Lance's own API on the same
//! data and index:
//!
//! * top-10 vector search with an IVF_PQ index: `lance_vector_search` vs
//!   `Scanner::nearest` (same nprobes), `ORDER BY l2_distance(...) LIMIT 10`
//!   (answered by the index) vs `Scanner::nearest` with Lance's defaults,
//!   and the same `ORDER BY` sorted exactly vs Lance's exact search;
//! * a point lookup `WHERE id = v` on a BTREE-indexed column vs the same
//!   rows without the index, and vs Lance's scanner with the filter;
//! * a full-text query through `lance_fts` vs `Scanner::full_text_search`;
//! * a hybrid query through `lance_hybrid_search` vs both Lance searches
//!   and the same fusion by hand ([`crate::hybrid`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, RecordBatch,
    RecordBatchIterator, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::prelude::{SessionConfig, SessionContext, col, lit};
use datafusion_lance::LanceSessionContextExt;
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};
use lance_index::scalar::FullTextSearchQuery;

use crate::common::{Args, Stats, exists, interleaved, ratio, side, splitmix};

pub(crate) const DIM: usize = 64;
pub(crate) const VECTORS: usize = 200_000;
const DOCS: usize = 200_000;

pub(crate) fn context() -> SessionContext {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    datafusion_lance::lance_session_context(SessionConfig::new().with_target_partitions(cpus))
}

pub(crate) async fn run(ctx: &SessionContext, sql: &str) -> usize {
    let batches = ctx
        .lance_sql(sql)
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run");
    batches.iter().map(|b| b.num_rows()).sum()
}

pub(crate) async fn write(uri: &str, batch: RecordBatch) {
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: 1_000_000,
        ..Default::default()
    };
    let schema = batch.schema();
    Dataset::write(
        RecordBatchIterator::new(vec![Ok(batch)], schema),
        uri,
        Some(params),
    )
    .await
    .expect("write");
}

/// A pseudo-Gaussian float from two hashes (sum of uniforms, centred).
pub(crate) fn gauss(i: u64) -> f32 {
    (0..4)
        .map(|k| (splitmix(i * 4 + k) >> 40) as f32 / (1u64 << 24) as f32)
        .sum::<f32>()
        - 2.0
}

/// Rows a configured Lance scanner returns.
pub(crate) async fn count(scanner: &lance::dataset::scanner::Scanner) -> usize {
    let batches: Vec<RecordBatch> = scanner
        .try_into_stream()
        .await
        .expect("stream")
        .try_collect()
        .await
        .expect("rows");
    batches.iter().map(|b| b.num_rows()).sum()
}

/// `VECTORS` pseudo-Gaussian `DIM`-dim vectors: the `emb` field and column.
pub(crate) fn vector_column() -> (Field, ArrayRef) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let values: Vec<f32> = (0..(VECTORS * DIM) as u64).map(gauss).collect();
    let field = Field::new(
        "emb",
        DataType::FixedSizeList(Arc::clone(&item), DIM as i32),
        true,
    );
    let column =
        FixedSizeListArray::try_new(item, DIM as i32, Arc::new(Float32Array::from(values)), None)
            .expect("vectors");
    (field, Arc::new(column))
}

/// Document `i`: 8 words of a 5,000-word vocabulary.
pub(crate) fn doc_body(i: u64) -> String {
    (0..8)
        .map(|k| format!("w{}", splitmix(i * 8 + k) % 5000))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn vector_literal(q: &[f32]) -> String {
    let parts: Vec<String> = q.iter().map(|x| format!("{x:?}")).collect();
    format!("[{}]", parts.join(", "))
}

pub(crate) fn row(name: &str, stats: &Stats, baseline: Option<&Stats>) {
    println!(
        "| {name} | {} | {} |",
        stats.cell_ms(),
        baseline.map_or("1 (baseline)".to_string(), |b| ratio(stats, b))
    );
}

pub(crate) async fn search_table(args: &Args) {
    vector_table(args).await;
    lookup_table(args).await;
    fts_table(args).await;
    crate::hybrid::hybrid_table(args).await;
}

/// The 200,000 × 64 vector table with its IVF_PQ index (written once,
/// then reused), registered in `ctx` as `v`; its location.
pub(crate) async fn vector_dataset(args: &Args, ctx: &SessionContext) -> String {
    let path = args
        .dir
        .join(format!("search-vectors-{VECTORS}x{DIM}.lance"));
    let uri = path.to_string_lossy().to_string();
    if !exists(&path) {
        let (emb_field, emb) = vector_column();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                emb_field,
            ])),
            vec![
                Arc::new(Int64Array::from_iter_values(0..VECTORS as i64)),
                emb,
            ],
        )
        .expect("batch");
        write(&uri, batch).await;
        run(
            ctx,
            &format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'"),
        )
        .await;
        run(
            ctx,
            "CREATE INDEX emb_pq ON v USING IVF_PQ (emb) WITH (num_partitions = 64, \
             num_sub_vectors = 16)",
        )
        .await;
    } else {
        run(
            ctx,
            &format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'"),
        )
        .await;
    }
    uri
}

async fn vector_table(args: &Args) {
    let ctx = context();
    let uri = vector_dataset(args, &ctx).await;
    let ds = Dataset::open(&uri).await.expect("open");
    let q: Vec<f32> = (0..DIM as u64).map(|i| gauss(1 << 40 | i)).collect();
    let literal = vector_literal(&q);
    let ann_sql = format!(
        "SELECT id, _distance FROM lance_vector_search('v', 'emb', {literal}, 10, 'nprobes=8')"
    );
    let order_sql = format!("SELECT id FROM v ORDER BY l2_distance(emb, {literal}) LIMIT 10");
    // The same ORDER BY, sorted exactly by DataFusion.
    let exact = context();
    for statement in [
        "SET lance.use_vector_index = false".to_string(),
        format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'"),
    ] {
        run(&exact, &statement).await;
    }
    let nearest = |nprobes: Option<usize>, use_index: bool| {
        let (ds, q) = (ds.clone(), q.clone());
        async move {
            let mut scanner = ds.scan();
            scanner.project(&["id"]).expect("project");
            scanner
                .nearest("emb", &Float32Array::from(q), 10)
                .expect("nearest");
            if let Some(n) = nprobes {
                scanner.nprobes(n);
            }
            scanner.use_index(use_index);
            assert_eq!(count(&scanner).await, 10);
        }
    };
    // Each comparison interleaved on its own: the exact searches read every
    // vector and would evict the indexed searches' caches.
    let comparisons = [
        (&ctx, &ann_sql, Some(8), true),
        (&ctx, &order_sql, None, true),
        (&exact, &order_sql, None, false),
    ];
    let mut s = Vec::new();
    for (sql_ctx, sql, nprobes, use_index) in comparisons {
        let mut pair = [
            side(|| async {
                assert_eq!(run(sql_ctx, sql).await, 10);
            }),
            side(|| nearest(nprobes, use_index)),
        ];
        s.extend(interleaved(args.iters, &mut pair).await);
    }
    println!(
        "\n## Search: top-10 vector search, {VECTORS} × {DIM}-dim vectors, IVF_PQ (64 partitions, \
         16 sub-vectors)\n"
    );
    println!("| query | time in ms (min–max) / cores | ÷ Lance directly |");
    println!("|---|---|---|");
    row(
        "`lance_vector_search(..., 10, 'nprobes=8')` (index)",
        &s[0],
        Some(&s[1]),
    );
    row("Lance `Scanner::nearest`, nprobes 8 (index)", &s[1], None);
    row(
        "`ORDER BY l2_distance(emb, q) LIMIT 10` (index, Lance's default nprobes)",
        &s[2],
        Some(&s[3]),
    );
    row(
        "Lance `Scanner::nearest` (index, default nprobes)",
        &s[3],
        None,
    );
    row(
        "same `ORDER BY`, `lance.use_vector_index = false` (exact, every distance)",
        &s[4],
        Some(&s[5]),
    );
    row(
        "Lance `Scanner::nearest` with `use_index(false)` (exact)",
        &s[5],
        None,
    );
}

async fn lookup_table(args: &Args) {
    let rows = args.rows;
    let ctx = context();
    let mut uris = Vec::new();
    for indexed in [true, false] {
        let path = args.dir.join(format!(
            "search-lookup-{rows}-{}.lance",
            if indexed { "btree" } else { "plain" }
        ));
        let uri = path.to_string_lossy().to_string();
        let name = if indexed { "indexed" } else { "plain" };
        if !exists(&path) {
            let batch = RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("id", DataType::Int64, false),
                    Field::new("v", DataType::Float64, false),
                ])),
                vec![
                    Arc::new(Int64Array::from_iter_values(
                        (0..rows as u64).map(|i| (splitmix(i) >> 1) as i64),
                    )),
                    Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64))),
                ],
            )
            .expect("batch");
            write(&uri, batch).await;
        }
        run(
            &ctx,
            &format!("CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}'"),
        )
        .await;
        if indexed && !path.join("_indices").is_dir() {
            run(
                &ctx,
                &format!("CREATE INDEX id_idx ON {name} USING BTREE (id)"),
            )
            .await;
        }
        uris.push(uri);
    }
    let key = (splitmix(rows as u64 / 2) >> 1) as i64;
    let indexed_sql = format!("SELECT v FROM indexed WHERE id = {key}");
    let plain_sql = format!("SELECT v FROM plain WHERE id = {key}");
    let ds = Dataset::open(&uris[0]).await.expect("open");
    let mut sides = vec![
        side(|| async {
            assert_eq!(run(&ctx, &indexed_sql).await, 1);
        }),
        side(|| async {
            assert_eq!(run(&ctx, &plain_sql).await, 1);
        }),
        side(|| {
            let ds = ds.clone();
            async move {
                let mut scanner = ds.scan();
                scanner.project(&["v"]).expect("project");
                scanner.filter_expr(col("id").eq(lit(key)));
                assert_eq!(count(&scanner).await, 1);
            }
        }),
    ];
    let s = interleaved(args.iters, &mut sides).await;
    println!("\n## Search: point lookup `WHERE id = v` in {rows} rows\n");
    println!("| query | time in ms (min–max) / cores | ÷ without the index |");
    println!("|---|---|---|");
    row("SQL, BTREE index on `id`", &s[0], Some(&s[1]));
    row("SQL, no index", &s[1], None);
    row(
        "Lance scanner with the filter, BTREE index",
        &s[2],
        Some(&s[1]),
    );
}

async fn fts_table(args: &Args) {
    let path = args.dir.join(format!("search-docs-{DOCS}.lance"));
    let uri = path.to_string_lossy().to_string();
    let ctx = context();
    let created = exists(&path);
    if !created {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("body", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(Int64Array::from_iter_values(0..DOCS as i64)),
                Arc::new(StringArray::from_iter_values(
                    (0..DOCS as u64).map(doc_body),
                )),
            ],
        )
        .expect("batch");
        write(&uri, batch).await;
    }
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE docs STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    if !created {
        run(&ctx, "CREATE INDEX body_fts ON docs USING INVERTED (body)").await;
    }
    let ds = Dataset::open(&uri).await.expect("open");
    let sql = "SELECT id, _score FROM lance_fts('docs', 'w17 w42', 'limit=10')";
    let mut sides = vec![
        side(|| async {
            assert_eq!(run(&ctx, sql).await, 10);
        }),
        side(|| {
            let ds = ds.clone();
            async move {
                let mut scanner = ds.scan();
                scanner.project(&["id"]).expect("project");
                scanner
                    .full_text_search(
                        FullTextSearchQuery::new("w17 w42".to_string()).limit(Some(10)),
                    )
                    .expect("fts");
                assert_eq!(count(&scanner).await, 10);
            }
        }),
    ];
    let s = interleaved(args.iters, &mut sides).await;
    println!("\n## Search: full text, {DOCS} documents of 8 words (5,000-word vocabulary)\n");
    println!("| query | time in ms (min–max) / cores | ÷ Lance directly |");
    println!("|---|---|---|");
    row(
        "`lance_fts('docs', 'w17 w42', 'limit=10')`",
        &s[0],
        Some(&s[1]),
    );
    row("Lance `Scanner::full_text_search`, limit 10", &s[1], None);
}
