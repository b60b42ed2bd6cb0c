//! [`LanceResult`]: the rows of a statement, exported as an Arrow C stream
//! (`__arrow_c_stream__`) so pyarrow, pandas, polars and DuckDB read them
//! without a copy, batch by batch as the statement produces them.

use std::sync::{Arc, Mutex};

use arrow::array::RecordBatchReader;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi::FFI_ArrowSchema;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::EmptyRecordBatchStream;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::to_py;
use crate::runtime::{RUNTIME, SIGNAL_CHECK};

/// The rows a statement returns: one stream, read once.
#[pyclass(module = "datafusion_lance", frozen)]
pub(crate) struct LanceResult {
    schema: SchemaRef,
    rows: Mutex<Option<Rows>>,
}

/// Batches already produced, then the rest of the statement's stream.
struct Rows {
    first: Option<RecordBatch>,
    stream: SendableRecordBatchStream,
}

impl LanceResult {
    /// The rows of `stream`, whose `first` batch was already read (a
    /// statement that changes tables has run once it gives one).
    pub(crate) fn new(first: Option<RecordBatch>, stream: SendableRecordBatchStream) -> Self {
        Self {
            schema: stream.schema(),
            rows: Mutex::new(Some(Rows { first, stream })),
        }
    }
}

impl Iterator for Rows {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.first.take() {
            return Some(Ok(batch));
        }
        match wait_for_next(&mut self.stream) {
            Ok(next) => next.map(|r| r.map_err(|e| ArrowError::ExternalError(Box::new(e)))),
            Err(interrupt) => {
                // Dropping the stream cancels the statement; the reader
                // gets an error naming why, and nothing more.
                let schema = self.stream.schema();
                self.stream = Box::pin(EmptyRecordBatchStream::new(schema));
                let why = Python::attach(|py| {
                    let kind = interrupt.get_type(py);
                    kind.name().map(|name| name.to_string())
                })
                .unwrap_or_else(|_| "a signal".to_string());
                Some(Err(ArrowError::ExternalError(
                    format!("interrupted ({why}): the statement was cancelled").into(),
                )))
            }
        }
    }
}

/// The stream's next batch, waited for with the GIL released (whoever
/// reads holds it or not); a signal raised meanwhile (Ctrl-C) ends the wait
/// with its error.
fn wait_for_next(
    stream: &mut SendableRecordBatchStream,
) -> PyResult<Option<datafusion::error::Result<RecordBatch>>> {
    Python::attach(|py| {
        py.detach(|| {
            RUNTIME.block_on(async {
                let mut ticks = tokio::time::interval(SIGNAL_CHECK);
                loop {
                    tokio::select! {
                        next = stream.next() => return Ok(next),
                        _ = ticks.tick() => Python::attach(|py| py.check_signals())?,
                    }
                }
            })
        })
    })
}

/// [`Rows`] with their schema: what the C stream exports.
struct Reader {
    schema: SchemaRef,
    rows: Rows,
}

impl Iterator for Reader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next()
    }
}

impl RecordBatchReader for Reader {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

#[pymethods]
impl LanceResult {
    /// The columns, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        schema_to_py(py, &self.schema)
    }

    /// The rows as an Arrow C stream (the PyCapsule stream interface). The
    /// rows can be read once.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // Columns are given as they are; a consumer casts if it must.
        let _ = requested_schema;
        let rows = self
            .rows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| to_py("the rows of this result were already read"))?;
        let reader = Reader {
            schema: Arc::clone(&self.schema),
            rows,
        };
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new(py, stream, Some(c"arrow_array_stream".into()))
    }

    /// The columns as an Arrow C schema (the PyCapsule schema interface).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        schema_capsule(py, &self.schema)
    }
}

fn schema_capsule<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyCapsule>> {
    let exported = FFI_ArrowSchema::try_from(schema).map_err(to_py)?;
    PyCapsule::new(py, exported, Some(c"arrow_schema".into()))
}

/// `schema` as a `pyarrow.Schema`.
pub(crate) fn schema_to_py<'py>(py: Python<'py>, schema: &Schema) -> PyResult<Bound<'py, PyAny>> {
    let capsule = schema_capsule(py, schema)?;
    py.import("pyarrow")?
        .getattr("Schema")?
        .call_method1("_import_from_c_capsule", (capsule,))
}
