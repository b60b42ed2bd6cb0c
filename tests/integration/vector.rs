//! Vector distances against Lance's own exact search: `ORDER BY
//! l2_distance(...) LIMIT k` (and cosine) through SQL gives the rows and
//! distances of `Scanner::nearest` without an index.

use std::sync::Arc;

use datafusion::arrow::array::{
    AsArray, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, RecordBatchIterator,
};
use datafusion::arrow::datatypes::{DataType, Field, Float32Type, Float64Type, Int64Type, Schema};
use lance::dataset::{WriteMode, WriteParams};
use lance_index::pb::VectorMetricType;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{context, dataset_path, ok, private_cache, sql};

const DIM: i32 = 16;

/// 2,000 random 16-dim vectors in 4 fragments.
async fn vectors(uri: &str, rng: &mut StdRng) {
    let n = 2000;
    let values: Vec<f32> = (0..n * DIM as usize)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let emb = FixedSizeListArray::try_new(
        Arc::clone(&item),
        DIM,
        Arc::new(Float32Array::from(values)),
        None,
    )
    .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("emb", DataType::FixedSizeList(item, DIM), true),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(emb),
        ],
    )
    .unwrap();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: 500,
        ..Default::default()
    };
    let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
    lance::Dataset::write(reader, uri, Some(params))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_distances_match_lances_exact_search() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "vectors.lance");
    let mut rng = StdRng::seed_from_u64(0x5eed_d157);
    vectors(&uri, &mut rng).await;
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let ds = lance::Dataset::open(&uri).await.unwrap();

    for (function, metric) in [
        ("l2_distance", VectorMetricType::L2),
        ("cosine_distance", VectorMetricType::Cosine),
    ] {
        for _ in 0..5 {
            let q: Vec<f32> = (0..DIM).map(|_| rng.random_range(-1.0..1.0)).collect();
            let literal = q
                .iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            let batches = sql(
                &ctx,
                &format!(
                    "SELECT id, {function}(emb, [{literal}]) AS d FROM v ORDER BY d, id LIMIT 10"
                ),
            )
            .await
            .unwrap();
            let ours: Vec<(i64, f64)> = batches
                .iter()
                .flat_map(|b| {
                    let ids = b.column(0).as_primitive::<Int64Type>().clone();
                    let d = b.column(1).as_primitive::<Float64Type>().clone();
                    (0..b.num_rows()).map(move |i| (ids.value(i), d.value(i)))
                })
                .collect();

            let mut scanner = ds.scan();
            scanner
                .nearest("emb", &Float32Array::from(q.clone()), 10)
                .unwrap()
                .distance_metric(metric.into())
                .use_index(false);
            scanner.project(&["id"]).unwrap();
            let theirs = scanner.try_into_batch().await.unwrap();
            let ids = theirs
                .column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>();
            let d = theirs
                .column_by_name("_distance")
                .unwrap()
                .as_primitive::<Float32Type>();
            let theirs: Vec<(i64, f64)> = (0..theirs.num_rows())
                .map(|i| (ids.value(i), d.value(i) as f64))
                .collect();

            assert_eq!(ours.len(), 10);
            assert_eq!(theirs.len(), 10);
            for (i, ((our_id, our_d), (their_id, their_d))) in ours.iter().zip(&theirs).enumerate()
            {
                assert!(
                    (our_d - their_d).abs() <= 1e-5 * their_d.abs().max(1.0),
                    "{function} rank {i}: {our_d} vs Lance's {their_d}"
                );
                // Equal up to distance ties.
                if our_id != their_id {
                    assert!(
                        (our_d - their_d).abs() <= 1e-5,
                        "{function} rank {i}: id {our_id} vs Lance's {their_id}"
                    );
                }
            }
            assert!(
                ours.iter().any(|(_, d)| *d > 0.0),
                "the distances are not all zero"
            );
        }
    }
}
