//! Scan options: how the automatic batch size follows the data.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use lance::dataset::WriteMode;

use crate::fixtures::{params, write};
use crate::util::{context, dataset_path, private_cache};

/// The most bytes per scanned batch the automatic batch size promises.
const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;

/// 3,000 rows whose strings are 20 KiB each (60 MB): the automatic batch
/// size keeps every batch within 2 MiB, sized from the data Lance decodes;
/// 100-byte strings still get large batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_automatic_batch_size_follows_string_lengths() {
    let dir = tempfile::tempdir().unwrap();
    for (name, length, min_rows) in [("long", 20 * 1024, 1), ("short", 100, 8192)] {
        let uri = dataset_path(&dir, &format!("{name}.lance"));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..3000)),
                Arc::new(StringArray::from_iter_values(
                    (0..3000).map(|i| format!("{i:0>width$}", width = length)),
                )),
            ],
        )
        .unwrap();
        // one fragment, so a batch is not cut short by a fragment's end
        write(&uri, vec![batch], params(WriteMode::Create, 1 << 20)).await;
        let ctx = context(1, &private_cache());
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .unwrap();
        let stream = ctx
            .sql(&format!("SELECT id, s FROM {name}"))
            .await
            .unwrap()
            .execute_stream()
            .await
            .unwrap();
        let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 3000, "{name}");
        let largest = batches
            .iter()
            .map(|b| b.get_array_memory_size())
            .max()
            .unwrap();
        assert!(
            largest <= MAX_BATCH_BYTES,
            "{name}: a batch of {largest} bytes ({} batches)",
            batches.len()
        );
        let most_rows = batches.iter().map(|b| b.num_rows()).max().unwrap();
        assert!(
            most_rows >= min_rows.min(3000),
            "{name}: {most_rows} rows per batch"
        );
    }
}
