//! `lance_fragments('<table or location>')`: the fragments of the latest
//! version — one row per fragment, from the manifest (no data file is read).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `id` | UInt64 | fragment id |
//! | `physical_rows` | UInt64 | rows stored in its data files (NULL if unrecorded) |
//! | `deleted_rows` | UInt64 | rows marked deleted (0 without a deletion file; NULL if unrecorded) |
//! | `rows` | UInt64 | live rows (`physical_rows - deleted_rows`) |
//! | `data_files` | UInt64 | data files (more than one once columns were added) |
//! | `bytes` | UInt64 | size of its data files (NULL where the manifest does not record it) |
//! | `has_deletions` | Boolean | whether it has a deletion file |

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::Result as DFResult;
use lance::Dataset;

use crate::location::TableLocation;

pub(super) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::UInt64, false),
        Field::new("physical_rows", DataType::UInt64, true),
        Field::new("deleted_rows", DataType::UInt64, true),
        Field::new("rows", DataType::UInt64, true),
        Field::new("data_files", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, true),
        Field::new("has_deletions", DataType::Boolean, false),
    ]))
}

pub(super) async fn batch(ds: &Dataset, _location: &TableLocation) -> DFResult<RecordBatch> {
    let fragments = ds.fragments().as_ref();
    let physical = |f: &lance_table::format::Fragment| f.physical_rows.map(|n| n as u64);
    let deleted = |f: &lance_table::format::Fragment| match &f.deletion_file {
        None => Some(0),
        Some(file) => file.num_deleted_rows.map(|n| n as u64),
    };
    let bytes = |f: &lance_table::format::Fragment| {
        f.files
            .iter()
            .map(|file| file.file_size_bytes.get().map(u64::from))
            .sum::<Option<u64>>()
    };
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.id),
            )),
            Arc::new(UInt64Array::from_iter(fragments.iter().map(physical))),
            Arc::new(UInt64Array::from_iter(fragments.iter().map(deleted))),
            Arc::new(UInt64Array::from_iter(
                fragments
                    .iter()
                    .map(|f| Some(physical(f)?.saturating_sub(deleted(f)?))),
            )),
            Arc::new(UInt64Array::from_iter_values(
                fragments.iter().map(|f| f.files.len() as u64),
            )),
            Arc::new(UInt64Array::from_iter(fragments.iter().map(bytes))),
            Arc::new(BooleanArray::from_iter(
                fragments.iter().map(|f| Some(f.deletion_file.is_some())),
            )),
        ],
    )?)
}
