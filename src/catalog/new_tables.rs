//! [`CatalogTables`] for the Lance catalogs of a context: where a table that
//! a statement below the catalog module creates goes (a permutation plan
//! built into `lake.schema.name`), and its namespace entry once committed —
//! the same placement and entry as `CREATE TABLE ... AS` (see `super::ddl`).

use std::sync::Arc;

use async_trait::async_trait;

use super::ddl::{child_id, place, register};
use super::lake::{Lake, Lakes};
use super::namespace::NamespaceKind;
use crate::error::{Result, fail};
use crate::location::redact_uri;
use crate::session::catalog_tables::{CatalogTable, CatalogTables, PlacedTable};

#[async_trait]
impl CatalogTables for Lakes {
    async fn place(
        &self,
        statement: &str,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> Result<Option<PlacedTable>> {
        let Some(lake) = self.named(catalog) else {
            return Ok(None);
        };
        let full = format!("{catalog}.{schema}.{table}");
        match lake.spec.kind {
            NamespaceKind::Directory => {}
            // Declaring the table (which names its location) is a change
            // that only running the statement may make.
            NamespaceKind::Rest => {
                return fail!(
                    not_supported,
                    "{statement}: table '{full}' would be in a Lance REST namespace ({}), whose \
                     server names a new table's location only when the table is declared; \
                     build it into a location instead",
                    lake.spec.display_root()
                );
            }
            NamespaceKind::Cloud => {
                return fail!(
                    not_supported,
                    "{statement}: table '{full}' would be in a LanceDB database ({}), which \
                     creates its tables itself; build it into a location instead",
                    lake.spec.display_root()
                );
            }
        }
        if let Some(entry) = lake.describe(schema, table).await? {
            return fail!(
                already_exists,
                "{statement}: table '{full}' already exists (at '{}')",
                redact_uri(&entry.location)
            );
        }
        let relative = place(&lake, statement, schema, table).await?;
        Ok(Some(PlacedTable {
            uri: lake.spec.location_of(&relative),
            storage_options: lake.spec.table_storage_options(),
            table: CatalogTable {
                catalog: catalog.to_string(),
                schema: schema.to_string(),
                table: table.to_string(),
                relative,
            },
        }))
    }

    fn can_enter(&self, table: &CatalogTable, uri: &str) -> Result<()> {
        self.entering(table, uri).map(|_| ())
    }

    async fn created(&self, table: &CatalogTable, uri: &str) -> Result<()> {
        let lake = self.entering(table, uri)?;
        if let Some(id) = child_id(&table.relative) {
            register(&lake, id, &table.relative, uri).await?;
        }
        lake.refresh().await
    }
}

impl Lakes {
    /// The catalog of this process that makes `table`'s entry: the one of
    /// that name, over the namespace `uri` is in.
    fn entering(&self, table: &CatalogTable, uri: &str) -> Result<Arc<Lake>> {
        match self.named(&table.catalog) {
            Some(lake) if lake.spec.location_of(&table.relative) == uri => Ok(lake),
            Some(lake) => fail!(
                not_found,
                "table '{table}': catalog '{}' of this process is over another namespace ({}), \
                 not the one holding '{}'",
                table.catalog,
                lake.spec.display_root(),
                redact_uri(uri)
            ),
            None => fail!(
                not_found,
                "table '{table}': its Lance catalog is not registered in this process"
            ),
        }
    }
}
