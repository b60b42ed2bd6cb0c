//! `LanceTable(uri, version=None, options=None)`: a Lance table as a
//! DataFusion table provider for Python (`ctx.register_table`).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_lance::{LanceTableOptions, LanceTableProvider};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::to_py;
use crate::insert::ExportedTable;
use crate::runtime::{RUNTIME, wait};

/// A Lance table: scans with this crate's fragment partitions and exact
/// pushdown, `INSERT INTO` through DataFusion's own SQL.
#[pyclass(module = "datafusion_lance", name = "LanceTable", frozen)]
pub(crate) struct LanceTable {
    pub(crate) provider: Arc<LanceTableProvider>,
}

#[pymethods]
impl LanceTable {
    /// Opens the table at `uri`: its latest version, or `version` (a
    /// version number or a tag); `options` as `CREATE EXTERNAL TABLE ...
    /// OPTIONS` takes them (`lance.storage.<key>`, `lance.batch_size`, …).
    #[new]
    #[pyo3(signature = (uri, version=None, options=None))]
    fn new(
        py: Python<'_>,
        uri: String,
        version: Option<Bound<'_, PyAny>>,
        options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let options = options.unwrap_or_default();
        let parsed = LanceTableOptions::from_options(&options).map_err(to_py)?;
        let mut builder = LanceTableProvider::builder(uri).with_table_options(parsed);
        if let Some(version) = version {
            if let Ok(number) = version.extract::<u64>() {
                builder = builder.with_version(number);
            } else if let Ok(tag) = version.extract::<String>() {
                builder = builder.with_tag(tag);
            } else {
                return Err(PyTypeError::new_err(
                    "LanceTable: version is a version number (int) or a tag (str)",
                ));
            }
        }
        let provider = wait(py, builder.build())?.map_err(to_py)?;
        Ok(Self {
            provider: Arc::new(provider),
        })
    }

    /// The table's location (credentials removed).
    #[getter]
    fn uri(&self) -> String {
        self.provider.location().display_uri.clone()
    }

    /// The table's columns, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::result::schema_to_py(py, &self.provider.schema())
    }

    /// The provider as DataFusion's Python bindings take it.
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let provider: Arc<dyn TableProvider> = Arc::new(ExportedTable {
            inner: Arc::clone(&self.provider) as _,
        });
        let exported = FFI_TableProvider::new_with_ffi_codec(
            provider,
            true,
            Some(RUNTIME.handle().clone()),
            logical_codec(session)?,
        );
        PyCapsule::new(py, exported, Some(c"datafusion_table_provider".into()))
    }

    fn __repr__(&self) -> String {
        format!("LanceTable('{}')", self.uri())
    }
}

/// The logical codec of the Python session `session` (an object with
/// `__datafusion_logical_extension_codec__`, or that capsule itself).
pub(crate) fn logical_codec(session: Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    const NAME: &str = "datafusion_logical_extension_codec";
    let method = "__datafusion_logical_extension_codec__";
    let capsule = if session.hasattr(method)? {
        session.getattr(method)?.call0()?
    } else {
        session
    };
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a DataFusion session or a '{NAME}' capsule"
        ))
    })?;
    let pointer = capsule.pointer_checked(Some(c"datafusion_logical_extension_codec"))?;
    // SAFETY: a capsule of that name holds an FFI_LogicalExtensionCodec
    // (DataFusion's Python bindings make it); it is cloned at once, before
    // any Python code runs.
    let codec = unsafe { pointer.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}
