//! Creates the demo dataset used by `make run`: a small TPC-H-like
//! `lineitem.lance` (60,000 rows in 6 fragments, 3 versions) under the given
//! directory (default `target/demo`).
//!
//! ```text
//! cargo run --example make_demo -- target/demo
//! ```

use std::sync::Arc;

use arrow::array::{
    Date32Array, FixedSizeListArray, Float32Array, Float64Array, Int64Array, RecordBatch,
    RecordBatchIterator, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};

fn hash(i: i64, column: u64) -> u64 {
    let mut x = (i as u64) << 4 | column;
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn batch(start: i64, n: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n).collect();
    let flags = ["A", "N", "R"];
    let status = ["F", "O"];
    let schema = Arc::new(Schema::new(vec![
        Field::new("l_orderkey", DataType::Int64, false),
        Field::new("l_quantity", DataType::Float64, false),
        Field::new("l_extendedprice", DataType::Float64, false),
        Field::new("l_discount", DataType::Float64, false),
        Field::new("l_tax", DataType::Float64, false),
        Field::new("l_returnflag", DataType::Utf8, false),
        Field::new("l_linestatus", DataType::Utf8, false),
        Field::new("l_shipdate", DataType::Date32, false),
        Field::new(
            "embedding",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), 4),
            true,
        ),
    ]));
    let embedding = FixedSizeListArray::try_new(
        Arc::new(Field::new("item", DataType::Float32, true)),
        4,
        Arc::new(Float32Array::from_iter_values(ids.iter().flat_map(|&i| {
            (0..4).map(move |k| ((i * 7 + k) % 13) as f32 / 13.0)
        }))),
        None,
    )
    .expect("embedding");
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|&i| (hash(i, 0) % 50 + 1) as f64),
            )),
            Arc::new(Float64Array::from_iter_values(
                ids.iter()
                    .map(|&i| 900.0 + (hash(i, 1) % 10_410_000) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|&i| (hash(i, 2) % 11) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|&i| (hash(i, 3) % 9) as f64 / 100.0),
            )),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|&i| flags[(hash(i, 4) % 3) as usize]),
            )),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|&i| status[(hash(i, 5) % 2) as usize]),
            )),
            Arc::new(Date32Array::from_iter_values(
                ids.iter().map(|&i| 8036 + (hash(i, 6) % 2526) as i32),
            )),
            Arc::new(embedding),
        ],
    )
    .expect("lineitem batch")
}

async fn write(uri: &str, batch: RecordBatch, mode: WriteMode) -> Dataset {
    let schema = batch.schema();
    let params = WriteParams {
        mode,
        max_rows_per_file: 10_000,
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new([Ok(batch)], schema),
        uri,
        Some(params),
    )
    .await
    .expect("write demo data")
}

#[tokio::main]
async fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/demo".to_string());
    std::fs::create_dir_all(&dir).expect("create demo directory");
    let uri = format!("{dir}/lineitem.lance");
    for old in [uri.clone(), format!("{dir}/orders.lance")] {
        if std::path::Path::new(&old).exists() {
            std::fs::remove_dir_all(&old).expect("remove old demo dataset");
        }
    }
    write(&uri, batch(0, 40_000), WriteMode::Create).await;
    let ds = write(&uri, batch(40_000, 20_000), WriteMode::Append).await;
    ds.tags().create("first_load", 1u64).await.expect("tag");
    let mut ds = ds;
    ds.delete("l_orderkey % 1000 = 0").await.expect("delete");
    println!(
        "demo dataset: {uri} (version {}, {} fragments, {} rows)",
        ds.version_id(),
        ds.count_fragments(),
        ds.count_rows(None).await.expect("count")
    );
}
