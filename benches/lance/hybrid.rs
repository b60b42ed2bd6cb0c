//! Hybrid search (part of **search**): `lance_hybrid_search` vs what a Lance
//! user writes by hand — `Scanner::nearest` and `Scanner::full_text_search`
//! (10 rows each, with row ids, run concurrently) and the same
//! reciprocal-rank fusion — on one table holding both a vector column with an
//! IVF_PQ index and a text column with an INVERTED index.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{AsArray, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, UInt64Type};
use futures::TryStreamExt;
use lance::Dataset;
use lance_index::scalar::FullTextSearchQuery;

use crate::common::{Args, exists, interleaved, side};
use crate::search::{
    DIM, VECTORS, context, doc_body, gauss, row, run, vector_column, vector_literal, write,
};

const K: usize = 10;
const RRF_K: f64 = 60.0;
const TEXT: &str = "w17 w42";

/// Row ids of a configured scanner's rows, in the order returned.
async fn row_ids(scanner: &lance::dataset::scanner::Scanner) -> Vec<u64> {
    let batches: Vec<RecordBatch> = scanner
        .try_into_stream()
        .await
        .expect("stream")
        .try_collect()
        .await
        .expect("rows");
    batches
        .iter()
        .flat_map(|b| {
            let ids = b.column_by_name("_rowid").expect("_rowid");
            ids.as_primitive::<UInt64Type>().values().to_vec()
        })
        .collect()
}

pub(crate) async fn hybrid_table(args: &Args) {
    let path = args
        .dir
        .join(format!("search-hybrid-{VECTORS}x{DIM}.lance"));
    let uri = path.to_string_lossy().to_string();
    let ctx = context();
    let created = exists(&path);
    if !created {
        let (emb_field, emb) = vector_column();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                emb_field,
                Field::new("body", DataType::Utf8, false),
            ])),
            vec![
                Arc::new(Int64Array::from_iter_values(0..VECTORS as i64)),
                emb,
                Arc::new(StringArray::from_iter_values(
                    (0..VECTORS as u64).map(doc_body),
                )),
            ],
        )
        .expect("batch");
        write(&uri, batch).await;
    }
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE hy STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    if !created {
        run(
            &ctx,
            "CREATE INDEX emb_pq ON hy USING IVF_PQ (emb) WITH (num_partitions = 64, \
             num_sub_vectors = 16)",
        )
        .await;
        run(&ctx, "CREATE INDEX body_fts ON hy USING INVERTED (body)").await;
    }
    let ds = Dataset::open(&uri).await.expect("open");
    let q: Vec<f32> = (0..DIM as u64).map(|i| gauss(1 << 41 | i)).collect();
    let sql = format!(
        "SELECT id, _relevance FROM lance_hybrid_search('hy', 'emb', {}, '{TEXT}', {K}, \
         'nprobes=8')",
        vector_literal(&q)
    );
    let by_hand = || {
        let (ds, q) = (ds.clone(), q.clone());
        async move {
            let mut nearest = ds.scan();
            nearest.project(&["id"]).expect("project");
            nearest
                .nearest("emb", &Float32Array::from(q), K)
                .expect("nearest");
            nearest.nprobes(8).with_row_id();
            let mut text = ds.scan();
            text.project(&["id"]).expect("project");
            text.full_text_search(FullTextSearchQuery::new(TEXT.to_string()).limit(Some(K as i64)))
                .expect("fts");
            text.with_row_id();
            let (a, b) = futures::join!(row_ids(&nearest), row_ids(&text));
            let mut relevance: HashMap<u64, f64> = HashMap::new();
            for ids in [a, b] {
                for (rank, id) in ids.into_iter().enumerate() {
                    *relevance.entry(id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
                }
            }
            let mut fused: Vec<(u64, f64)> = relevance.into_iter().collect();
            fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            fused.truncate(K);
            // Lance returns the rows by id; this baseline stops at the ids.
            assert_eq!(fused.len(), K);
        }
    };
    let mut sides = vec![
        side(|| async {
            assert_eq!(run(&ctx, &sql).await, K);
        }),
        side(by_hand),
    ];
    let s = interleaved(args.iters, &mut sides).await;
    println!(
        "\n## Search: hybrid, {VECTORS} rows of a {DIM}-dim vector (IVF_PQ, 64 partitions, \
         16 sub-vectors) and 8 words (INVERTED)\n"
    );
    println!("| query | time in ms (min–max) / cores | ÷ Lance by hand |");
    println!("|---|---|---|");
    row(
        &format!("`lance_hybrid_search(..., '{TEXT}', {K}, 'nprobes=8')`"),
        &s[0],
        Some(&s[1]),
    );
    row(
        "Lance `Scanner::nearest` (nprobes 8) and `Scanner::full_text_search` (limit 10) concurrently, fused by hand (row ids only)",
        &s[1],
        None,
    );
}
