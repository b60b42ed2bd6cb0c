//! `lance_tags('<table or location>')`: the table's tags, by name.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `tag` | Utf8 | tag name |
//! | `version` | UInt64 | the version it points to |
//! | `created_at` | Timestamp(µs, UTC) | when it was created (NULL if unrecorded) |
//! | `updated_at` | Timestamp(µs, UTC) | when it was last moved (NULL if never) |

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::{DataFusionError, Result as DFResult};
use lance::Dataset;

use crate::error::Error;
use crate::location::TableLocation;

pub(super) fn schema() -> SchemaRef {
    let time = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("tag", DataType::Utf8, false),
        Field::new("version", DataType::UInt64, false),
        Field::new("created_at", time.clone(), true),
        Field::new("updated_at", time, true),
    ]))
}

pub(super) async fn batch(ds: &Dataset, location: &TableLocation) -> DFResult<RecordBatch> {
    let mut tags: Vec<_> = ds
        .tags()
        .list()
        .await
        .map_err(|e| DataFusionError::from(Error::lance("listing tags of", &location.uri, e)))?
        .into_iter()
        .collect();
    tags.sort_by(|a, b| a.0.cmp(&b.0));
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.timestamp_micros());
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                tags.iter().map(|(name, _)| name.as_str()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                tags.iter().map(|(_, t)| t.version),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter(tags.iter().map(|(_, t)| time(t.created_at)))
                    .with_timezone("UTC"),
            ),
            Arc::new(
                TimestampMicrosecondArray::from_iter(tags.iter().map(|(_, t)| time(t.updated_at)))
                    .with_timezone("UTC"),
            ),
        ],
    )?)
}
