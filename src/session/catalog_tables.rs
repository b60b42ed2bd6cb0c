//! New tables in a Lance catalog, for statements and plan nodes that sit
//! below the catalog module: where such a table goes (asked while
//! planning: reads the namespace, writes nothing) and its namespace entry
//! once its first version is committed (made while executing).
//!
//! The catalogs of a context set one [`CatalogTablesHook`] on its
//! `SessionConfig`; a plan node carries only the plain [`CatalogTable`]
//! and finds the hook through its task's session at run time.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::execution::config::SessionConfig;

use crate::error::{Error, Result};

/// A table of a Lance catalog, as a plan carries it: its names and where
/// it is stored relative to the namespace's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogTable {
    /// The catalog's name in the session.
    pub catalog: String,
    /// The schema (namespace) holding the table.
    pub schema: String,
    /// The table's name.
    pub table: String,
    /// Its location relative to the namespace's root.
    pub relative: String,
}

impl fmt::Display for CatalogTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.catalog, self.schema, self.table)
    }
}

/// Where a new catalog table is to be written.
#[derive(Debug, Clone)]
pub(crate) struct PlacedTable {
    pub(crate) table: CatalogTable,
    /// The full location.
    pub(crate) uri: String,
    /// The storage options that reach it (never shown).
    pub(crate) storage_options: BTreeMap<String, String>,
}

/// What the catalogs of a context do for new tables (implemented by the
/// catalog module).
#[async_trait]
pub(crate) trait CatalogTables: fmt::Debug + Send + Sync {
    /// Where new table `schema.table` of Lance catalog `catalog` goes, for
    /// `statement` (named in errors); `None` when `catalog` is no Lance
    /// catalog of this context. Reads the namespace, writes nothing.
    async fn place(
        &self,
        statement: &str,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> Result<Option<PlacedTable>>;

    /// Whether this process's catalog can make the entry of `table`
    /// stored at `uri` (asked before the table is written).
    fn can_enter(&self, table: &CatalogTable, uri: &str) -> Result<()>;

    /// Makes the namespace entry of `table`, whose first version was just
    /// committed at `uri`; on failure removes its data again.
    async fn created(&self, table: &CatalogTable, uri: &str) -> Result<()>;
}

/// The [`CatalogTables`] of a context (a `SessionConfig` extension).
#[derive(Debug, Clone)]
pub(crate) struct CatalogTablesHook(pub(crate) Arc<dyn CatalogTables>);

/// The hook of `config`'s catalogs, or an error naming `table` when this
/// process has no Lance catalogs (a plan decoded on another process).
pub(crate) fn catalog_tables(
    config: &SessionConfig,
    table: &str,
) -> Result<Arc<dyn CatalogTables>> {
    match config.get_extension::<CatalogTablesHook>() {
        Some(hook) => Ok(Arc::clone(&hook.0)),
        None => Err(Error::not_found(format!(
            "table '{table}': its Lance catalog is not registered in this process"
        ))),
    }
}
