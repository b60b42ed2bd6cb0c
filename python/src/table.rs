//! `LanceTable(uri, version=None, options=None)`: a Lance table as a
//! DataFusion table provider for Python (`ctx.register_table`).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::catalog::TableProviderFactory;
use datafusion::common::{DFSchema, TableReference};
use datafusion::logical_expr::CreateExternalTable;
use datafusion::prelude::SessionConfig;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_lance::{LanceTableOptions, LanceTableProvider, LanceTableProviderFactory};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::to_py;
use crate::insert::ExportedTable;
use crate::runtime::{RUNTIME, wait};

/// A Lance table: scans with this crate's fragment partitions and exact
/// pushdown, `INSERT INTO` through DataFusion's own SQL.
#[pyclass(module = "datafusion_lance", name = "LanceTable", frozen)]
pub(crate) struct LanceTable {
    pub(crate) provider: Arc<dyn TableProvider>,
    /// The table's location, credentials removed.
    uri: String,
}

#[pymethods]
impl LanceTable {
    /// Opens the table at `uri`: its latest version, or `version` (a
    /// version number or a tag); `options` as `CREATE EXTERNAL TABLE ...
    /// OPTIONS` takes them (`lance.storage.<key>`, `lance.max_rows_per_file`, …;
    /// for a LanceDB table, `db://DATABASE/TABLE`, `api_key`, `region`, …).
    #[new]
    #[pyo3(signature = (uri, version=None, options=None))]
    fn new(
        py: Python<'_>,
        uri: String,
        version: Option<Bound<'_, PyAny>>,
        options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let options = options.unwrap_or_default();
        let version = match version {
            None => None,
            Some(v) => Some(if let Ok(number) = v.extract::<u64>() {
                Version::Number(number)
            } else if let Ok(tag) = v.extract::<String>() {
                Version::Tag(tag)
            } else {
                return Err(PyTypeError::new_err(
                    "LanceTable: version is a version number (int) or a tag (str)",
                ));
            }),
        };
        if uri.starts_with("db://") {
            return open_cloud(py, uri, version, options);
        }
        let parsed = LanceTableOptions::from_options(&options).map_err(to_py)?;
        let mut builder = LanceTableProvider::builder(uri).with_table_options(parsed);
        builder = match version {
            Some(Version::Number(number)) => builder.with_version(number),
            Some(Version::Tag(tag)) => builder.with_tag(tag),
            None => builder,
        };
        let provider = wait(py, builder.build())?.map_err(to_py)?;
        Ok(Self {
            uri: provider.location().display_uri.clone(),
            provider: Arc::new(provider),
        })
    }

    /// The table's location (credentials removed).
    #[getter]
    fn uri(&self) -> String {
        self.uri.clone()
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
            inner: Arc::clone(&self.provider),
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

/// A version asked for by number or by tag.
enum Version {
    Number(u64),
    Tag(String),
}

/// A LanceDB table (`db://DATABASE/TABLE`), opened as `CREATE EXTERNAL
/// TABLE … LOCATION 'db://…' OPTIONS (…)` opens it, the version as its
/// `lance.version` option.
fn open_cloud(
    py: Python<'_>,
    uri: String,
    version: Option<Version>,
    mut options: HashMap<String, String>,
) -> PyResult<LanceTable> {
    match version {
        Some(Version::Number(number)) => options.insert("lance.version".into(), number.to_string()),
        Some(Version::Tag(tag)) => {
            return Err(PyValueError::new_err(format!(
                "LanceTable('{}'): a LanceDB table opens at a version number, not a tag \
                 ('{tag}'); in SQL, VERSION AS OF '{tag}' reads a tag's version",
                datafusion_lance::storage::redact_uri(&uri)
            )));
        }
        None => None,
    };
    let display = datafusion_lance::storage::redact_uri(&uri);
    let cmd = CreateExternalTable::builder(
        TableReference::bare(display.clone()),
        uri,
        "LANCE",
        Arc::new(DFSchema::empty()),
    )
    .with_options(options)
    .build();
    let state = datafusion_lance::lance_session_context(SessionConfig::new()).state();
    let provider = wait(py, async move {
        LanceTableProviderFactory::default()
            .create(&state, &cmd)
            .await
    })?
    .map_err(to_py)?;
    Ok(LanceTable {
        provider,
        uri: display,
    })
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
