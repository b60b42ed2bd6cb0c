//! `LanceCatalog(root, options=None)`: a Lance namespace (a directory, or
//! a REST namespace server) as a DataFusion catalog for Python
//! (`ctx.register_catalog_provider`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::error::Result as DfResult;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_ffi::catalog_provider::FFI_CatalogProvider;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::to_py;
use crate::insert::ExportedTable;
use crate::runtime::{RUNTIME, in_runtime, wait};
use crate::table::logical_codec;

/// A Lance namespace as a catalog: its root namespace is schema `public`,
/// child namespaces are schemas.
#[pyclass(module = "datafusion_lance", name = "LanceCatalog", frozen)]
pub(crate) struct LanceCatalog {
    pub(crate) root: String,
    pub(crate) options: BTreeMap<String, String>,
    /// The catalog given to DataFusion: the one an engine registered under
    /// the context's name for it, else one of its own.
    provider: Mutex<Option<Arc<dyn CatalogProvider>>>,
}

impl LanceCatalog {
    /// Makes `provider` (registered in an engine) the one given to
    /// DataFusion.
    pub(crate) fn bind(&self, provider: Arc<dyn CatalogProvider>) {
        *self.provider.lock().unwrap_or_else(|e| e.into_inner()) = Some(provider);
    }
}

/// The name a catalog has when no engine names it.
const UNNAMED: &str = "lance";

#[pymethods]
impl LanceCatalog {
    /// The namespace at `root` (a directory or URI; `rest+http(s)://HOST:PORT`
    /// for a REST namespace server), reached with storage `options`. Nothing
    /// is opened yet.
    #[new]
    #[pyo3(signature = (root, options=None))]
    fn new(root: String, options: Option<HashMap<String, String>>) -> Self {
        Self {
            root,
            options: options.unwrap_or_default().into_iter().collect(),
            provider: Mutex::new(None),
        }
    }

    /// The catalog as DataFusion's Python bindings take it.
    fn __datafusion_catalog_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let bound = self
            .provider
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let provider = match bound {
            Some(provider) => provider,
            None => {
                let ctx = datafusion_lance::lance_session_context(SessionConfig::new());
                let (root, options) = (self.root.clone(), self.options.clone());
                let built = wait(py, async move {
                    datafusion_lance::register_lance_catalog(&ctx, UNNAMED, &root, options).await
                })?
                .map_err(to_py)?;
                let provider: Arc<dyn CatalogProvider> = built;
                self.bind(Arc::clone(&provider));
                provider
            }
        };
        let exported = FFI_CatalogProvider::new_with_ffi_codec(
            Arc::new(ExportedCatalog(provider)),
            Some(RUNTIME.handle().clone()),
            logical_codec(session)?,
        );
        PyCapsule::new(py, exported, Some(c"datafusion_catalog_provider".into()))
    }

    fn __repr__(&self) -> String {
        format!(
            "LanceCatalog('{}')",
            datafusion_lance::storage::redact_uri(&self.root)
        )
    }
}

/// `catalog` registered as `name` in `ctx`.
pub(crate) async fn register(
    ctx: &SessionContext,
    name: &str,
    catalog: &LanceCatalog,
) -> datafusion_lance::Result<Arc<dyn CatalogProvider>> {
    let built =
        datafusion_lance::register_lance_catalog(ctx, name, &catalog.root, catalog.options.clone())
            .await?;
    Ok(built)
}

/// A catalog as exported to Python: its tables are [`ExportedTable`]s, so
/// that `INSERT INTO catalog.schema.t` through DataFusion's own SQL pumps
/// its foreign input as a registered table's does.
#[derive(Debug)]
struct ExportedCatalog(Arc<dyn CatalogProvider>);

impl CatalogProvider for ExportedCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.0.schema_names()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let schema = self.0.schema(name)?;
        Some(Arc::new(ExportedSchema(schema)))
    }

    fn register_schema(
        &self,
        name: &str,
        schema: Arc<dyn SchemaProvider>,
    ) -> DfResult<Option<Arc<dyn SchemaProvider>>> {
        self.0.register_schema(name, schema)
    }

    fn deregister_schema(
        &self,
        name: &str,
        cascade: bool,
    ) -> DfResult<Option<Arc<dyn SchemaProvider>>> {
        self.0.deregister_schema(name, cascade)
    }
}

/// A schema of an [`ExportedCatalog`].
#[derive(Debug)]
struct ExportedSchema(Arc<dyn SchemaProvider>);

#[async_trait]
impl SchemaProvider for ExportedSchema {
    fn owner_name(&self) -> Option<&str> {
        self.0.owner_name()
    }

    fn table_names(&self) -> Vec<String> {
        self.0.table_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let table = in_runtime(self.0.table(name)).await?;
        Ok(table.map(|inner| Arc::new(ExportedTable { inner }) as Arc<dyn TableProvider>))
    }

    async fn table_type(&self, name: &str) -> DfResult<Option<datafusion::datasource::TableType>> {
        in_runtime(self.0.table_type(name)).await
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.0.register_table(name, table)
    }

    fn deregister_table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.0.deregister_table(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.0.table_exist(name)
    }
}
