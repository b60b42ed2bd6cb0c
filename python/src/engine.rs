//! [`Engine`]: this crate's SQL front door beside a Python `SessionContext`
//! — the statements DataFusion's own `ctx.sql` cannot run (MERGE INTO, time
//! travel, DDL in Lance catalogs, DELETE / UPDATE, index DDL, …) over the
//! Lance tables and catalogs registered on that context.

use std::sync::Arc;

use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::LanceSessionContextExt;
use futures::StreamExt;
use pyo3::prelude::*;

use crate::catalog::{self, LanceCatalog};
use crate::errors::to_py;
use crate::functions::{ScalarFunction, TableFunction};
use crate::result::LanceResult;
use crate::runtime::wait;
use crate::table::LanceTable;

/// One context of this crate: its tables, catalogs and settings.
#[pyclass(module = "datafusion_lance", frozen)]
pub(crate) struct Engine {
    ctx: SessionContext,
}

#[pymethods]
impl Engine {
    #[new]
    fn new() -> Self {
        let config = SessionConfig::new().with_information_schema(true);
        let ctx = datafusion_lance::lance_session_context(config);
        Self {
            ctx: datafusion_lance::catalogs::enable_lance_url_tables(ctx),
        }
    }

    /// Registers `table` as `name`.
    fn register_table(&self, name: &str, table: &LanceTable) -> PyResult<()> {
        self.ctx
            .register_table(name, Arc::clone(&table.provider) as _)
            .map_err(to_py)?;
        Ok(())
    }

    /// Forgets table `name`.
    fn deregister_table(&self, name: &str) -> PyResult<()> {
        self.ctx.deregister_table(name).map_err(to_py)?;
        Ok(())
    }

    /// Registers `catalog` as `name`; the catalog DataFusion is given is
    /// then this one.
    fn register_catalog(&self, py: Python<'_>, name: &str, catalog: &LanceCatalog) -> PyResult<()> {
        let provider = wait(py, catalog::register(&self.ctx, name, catalog))?.map_err(to_py)?;
        catalog.bind(provider);
        Ok(())
    }

    /// Runs `text` (one statement) through the crate's front door. The
    /// statement has run up to its first batch of rows when this returns
    /// (a statement that changes a table has committed); the rest stream.
    fn sql(&self, py: Python<'_>, text: &str) -> PyResult<LanceResult> {
        let ctx = self.ctx.clone();
        let text = text.to_string();
        let (first, stream) = wait(py, async move {
            let frame = ctx.lance_sql(&text).await?;
            let mut stream = frame.execute_stream().await?;
            let first = stream.next().await.transpose()?;
            Ok::<_, datafusion::error::DataFusionError>((first, stream))
        })?
        .map_err(to_py)?;
        Ok(LanceResult::new(first, stream))
    }

    /// The crate's table functions (DataFusion's own stay DataFusion's).
    fn table_functions(&self) -> Vec<TableFunction> {
        let mut functions: Vec<TableFunction> = self
            .ctx
            .state()
            .table_functions()
            .iter()
            .filter(|(name, _)| name.starts_with("lance_"))
            .map(|(name, f)| TableFunction {
                name: name.clone(),
                function: Arc::clone(f.function()),
            })
            .collect();
        functions.sort_by(|a, b| a.name.cmp(&b.name));
        functions
    }

    /// The crate's scalar functions.
    fn scalar_functions(&self) -> Vec<ScalarFunction> {
        datafusion_lance::functions::scalar_functions()
            .into_iter()
            .map(|function| ScalarFunction { function })
            .collect()
    }
}
