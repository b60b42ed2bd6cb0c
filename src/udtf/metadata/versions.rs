//! `lance_versions('<table or location>')`: the version history of a Lance
//! table — one row per version with the operation that produced it.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `version` | UInt64 | version number |
//! | `timestamp` | Timestamp(µs, UTC) | commit time |
//! | `operation` | Utf8 | `Overwrite`, `Append`, `Delete`, `Update`, ... (NULL if unrecorded) |
//! | `fragments` | UInt64 | live fragments in the version |
//! | `rows` | UInt64 | live rows in the version |
//!
//! Reads one manifest and one transaction file per version.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::{DataFusionError, Result as DFResult};
use lance::Dataset;

use crate::error::Error;
use crate::location::TableLocation;

pub(super) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("version", DataType::UInt64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("operation", DataType::Utf8, true),
        Field::new("fragments", DataType::UInt64, true),
        Field::new("rows", DataType::UInt64, true),
    ]))
}

pub(super) async fn batch(ds: &Dataset, location: &TableLocation) -> DFResult<RecordBatch> {
    let lance_err =
        |e| DataFusionError::from(Error::lance("listing versions of", &location.uri, e));
    let versions = ds.versions().await.map_err(lance_err)?;
    let mut operations = Vec::with_capacity(versions.len());
    for v in &versions {
        let txn = ds
            .read_transaction_by_version(v.version)
            .await
            .map_err(lance_err)?;
        operations.push(txn.map(|t| t.operation.to_string()));
    }
    let number = |v: &lance::dataset::Version, key: &str| {
        v.metadata.get(key).and_then(|n| n.parse::<u64>().ok())
    };
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(UInt64Array::from_iter_values(
                versions.iter().map(|v| v.version),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    versions.iter().map(|v| v.timestamp.timestamp_micros()),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from(operations)),
            Arc::new(UInt64Array::from(
                versions
                    .iter()
                    .map(|v| number(v, "total_fragments"))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(UInt64Array::from(
                versions
                    .iter()
                    .map(|v| number(v, "total_rows"))
                    .collect::<Vec<_>>(),
            )),
        ],
    )?)
}
