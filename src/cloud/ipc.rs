//! Arrow IPC bodies: the service answers a query with an Arrow IPC file
//! (older services with a stream).

use std::io::Cursor;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::ipc::reader::{FileReader, StreamReader};

const FILE_MAGIC: &[u8] = b"ARROW1";

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
