//! `lance_indices('<table or location>')`: the indices of the latest version
//! — one row per index, from the manifest (no index file is read).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `name` | Utf8 | the index's name |
//! | `columns` | Utf8 | the column(s) it indexes, comma-separated |
//! | `type` | Utf8 | `BTREE`, `BITMAP`, `INVERTED`, `IVF_PQ`, ... |
//! | `segments` | UInt64 | index segments (more than one after appends are indexed) |
//! | `indexed_fragments` | UInt64 | fragments of this version the index covers |
//! | `unindexed_fragments` | UInt64 | fragments it does not cover (searched without it) |
//! | `unindexed_rows` | UInt64 | live rows in those fragments (NULL if unrecorded) |
//!
//! Lance's own system indices (fragment reuse, MemWAL) are not listed.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use lance::Dataset;
use lance::index::DatasetIndexExt;
use lance_index::is_system_index;

use crate::error::Error;
use crate::location::TableLocation;
use crate::physical_plan::IndexMethod;

pub(super) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("columns", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
        Field::new("segments", DataType::UInt64, false),
        Field::new("indexed_fragments", DataType::UInt64, false),
        Field::new("unindexed_fragments", DataType::UInt64, false),
        Field::new("unindexed_rows", DataType::UInt64, true),
    ]))
}

/// Lance's name for an index type as SQL spells it (`btree` → `BTREE`,
/// `labellist` → `LABEL_LIST`); other names upper-cased.
fn sql_type(lance: &str) -> String {
    let squash = |s: &str| s.replace('_', "").to_ascii_uppercase();
    IndexMethod::ALL
        .into_iter()
        .find(|m| squash(m.name()) == squash(lance))
        .map(|m| m.name().to_string())
        .unwrap_or_else(|| lance.to_ascii_uppercase())
}

pub(super) async fn batch(ds: &Dataset, location: &TableLocation) -> DFResult<RecordBatch> {
    let err = |e| DataFusionError::from(Error::lance("listing the indices of", &location.uri, e));
    let described = ds.describe_indices(None).await.map_err(err)?;
    let (mut names, mut columns, mut types) = (Vec::new(), Vec::new(), Vec::new());
    let (mut segments, mut indexed, mut unindexed, mut unindexed_rows) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for index in &described {
        if index.metadata().iter().any(is_system_index) {
            continue;
        }
        let covered: HashSet<u64> = index
            .metadata()
            .iter()
            .filter_map(|segment| segment.fragment_bitmap.as_ref())
            .flat_map(|bitmap| bitmap.iter().map(u64::from))
            .collect();
        let (inside, outside): (Vec<_>, Vec<_>) =
            ds.fragments().iter().partition(|f| covered.contains(&f.id));
        names.push(index.name().to_string());
        columns.push(
            index
                .field_ids()
                .iter()
                .filter_map(|id| ds.schema().field_by_id(*id as i32))
                .map(|f| f.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        );
        types.push(sql_type(index.index_type()));
        segments.push(index.metadata().len() as u64);
        indexed.push(inside.len() as u64);
        unindexed.push(outside.len() as u64);
        unindexed_rows.push(
            outside
                .iter()
                .map(|f| f.num_rows().map(|n| n as u64))
                .sum::<Option<u64>>(),
        );
    }
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(columns)),
            Arc::new(StringArray::from(types)),
            Arc::new(UInt64Array::from(segments)),
            Arc::new(UInt64Array::from(indexed)),
            Arc::new(UInt64Array::from(unindexed)),
            Arc::new(UInt64Array::from(unindexed_rows)),
        ],
    )?)
}
