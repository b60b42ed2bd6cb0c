//! The rows [`crate::physical_plan::LanceWriteExec`] sends to the commit: one per
//! partition, its row count and the fragments it wrote (as JSON), so the
//! writers and the commit share no state and may run in different processes.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use lance_table::format::Fragment;

/// Schema of the rows [`crate::physical_plan::LanceWriteExec`] emits: one row per partition.
pub(crate) fn fragments_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("rows", DataType::UInt64, false),
        Field::new("fragments", DataType::Utf8, false),
    ]))
}

/// Encodes the fragments one partition wrote.
pub(crate) fn encode_fragments(rows: u64, fragments: &[Fragment]) -> DFResult<RecordBatch> {
    let json =
        serde_json::to_string(fragments).map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(RecordBatch::try_new(
        fragments_schema(),
        vec![
            Arc::new(UInt64Array::from(vec![rows])),
            Arc::new(StringArray::from(vec![json])),
        ],
    )?)
}

/// Decodes rows emitted by [`crate::physical_plan::LanceWriteExec`].
pub(crate) fn decode_fragments(batch: &RecordBatch) -> DFResult<(u64, Vec<Fragment>)> {
    let bad = || DataFusionError::Internal("unexpected fragment metadata batch".into());
    let rows = batch
        .column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or_else(bad)?;
    let json = batch
        .column(1)
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(bad)?;
    let mut total = 0;
    let mut fragments = Vec::new();
    for i in 0..batch.num_rows() {
        total += rows.value(i);
        let decoded: Vec<Fragment> = serde_json::from_str(json.value(i))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        fragments.extend(decoded);
    }
    Ok((total, fragments))
}
