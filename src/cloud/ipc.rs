//! Arrow IPC bodies: the service answers a query with an Arrow IPC file
//! (older services with a stream).

use std::io::Cursor;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::ipc::reader::{FileReader, StreamReader};
use datafusion::arrow::ipc::writer::StreamWriter;

const FILE_MAGIC: &[u8] = b"ARROW1";

/// `batches` as an IPC stream (what write requests send).
pub(crate) fn encode(schema: &Schema, batches: &[RecordBatch]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut writer = StreamWriter::try_new(&mut body, schema).map_err(|e| e.to_string())?;
    for batch in batches {
        writer.write(batch).map_err(|e| e.to_string())?;
    }
    writer.finish().map_err(|e| e.to_string())?;
    drop(writer);
    Ok(body)
}

/// The batches of an IPC file or stream.
pub(crate) fn decode(body: &[u8]) -> Result<Vec<RecordBatch>, String> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let batches: Result<Vec<_>, _> = if body.starts_with(FILE_MAGIC) {
        FileReader::try_new(Cursor::new(body), None)
            .map_err(|e| e.to_string())?
            .collect()
    } else {
        StreamReader::try_new(Cursor::new(body), None)
            .map_err(|e| e.to_string())?
            .collect()
    };
    batches.map_err(|e| e.to_string())
}
