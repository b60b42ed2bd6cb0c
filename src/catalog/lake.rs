//! [`LanceCatalog`]: a DataFusion catalog over a Lance namespace (a
//! directory namespace or a REST namespace server).
//!
//! The namespace's root holds the tables of the schema named like the
//! session's default schema (`public`); each child namespace is a schema of
//! its own. Tables are opened when a statement names them, through the
//! context's Lance session; listings (`SHOW TABLES`,
//! `information_schema`) come from a snapshot of the namespace taken when
//! the catalog is registered and refreshed by [`refresh_lance_catalogs`]
//! — which `lance_sql` and `lance-sql` call before every statement that
//! lists tables, and after every `CREATE` / `DROP` of theirs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::prelude::SessionContext;
use lance_namespace::LanceNamespace;
use lance_namespace::models::{DescribeTableRequest, ListNamespacesRequest, ListTablesRequest};

use super::namespace::{NamespaceKind, NamespaceSpec, is_not_found};
use crate::error::{Error, Result, fail};
use crate::name::{NameKind, can_look_up, check_new};
use crate::session::LanceSessionCache;
use crate::session::catalog_tables::{CatalogTables, CatalogTablesHook};
use crate::table::LanceTableProvider;
use crate::table::cloud::CloudTableProvider;
use crate::table::lookup::IoCatalogs;

/// Where a table of a namespace lives and the storage options that reach it
/// (never shown).
#[derive(Clone)]
pub(crate) struct TableEntry {
    pub(crate) location: String,
    pub(crate) storage_options: BTreeMap<String, String>,
}

/// What a catalog and its schemas share.
#[derive(Debug)]
pub(crate) struct Lake {
    pub(crate) name: String,
    pub(crate) spec: NamespaceSpec,
    /// The schema name of the root namespace.
    pub(crate) root_schema: String,
    pub(crate) namespace: Arc<dyn LanceNamespace>,
    pub(crate) cache: Arc<LanceSessionCache>,
    /// Schema name → table names, as last listed.
    listing: RwLock<BTreeMap<String, BTreeSet<String>>>,
}

impl Lake {
    /// The namespace id of schema `schema`.
    pub(crate) fn namespace_id(&self, schema: &str) -> Vec<String> {
        if schema == self.root_schema {
            vec![]
        } else {
            vec![schema.to_string()]
        }
    }

    /// The namespace id of table `table` in schema `schema`.
    pub(crate) fn table_id(&self, schema: &str, table: &str) -> Vec<String> {
        let mut id = self.namespace_id(schema);
        id.push(table.to_string());
        id
    }

    /// Where table `schema.table` lives and how to reach it, or `None`
    /// when the namespace has no such table.
    pub(crate) async fn describe(&self, schema: &str, table: &str) -> Result<Option<TableEntry>> {
        // A name that would leave the namespace's root names no table of it.
        if !can_look_up(schema) || !can_look_up(table) {
            return Ok(None);
        }
        let full = format!("{}.{schema}.{table}", self.name);
        if self.spec.kind == NamespaceKind::Cloud {
            return Err(Error::not_supported(format!(
                "table '{full}': a table of a LanceDB catalog ({}) has no storage location; \
                 only queries read it here",
                self.spec.display_root()
            )));
        }
        let request = DescribeTableRequest {
            id: Some(self.table_id(schema, table)),
            ..Default::default()
        };
        let response = match self.namespace.describe_table(request).await {
            Ok(response) => response,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(self.spec.error(&format!("looking up table '{full}'"), e)),
        };
        if response.managed_versioning == Some(true) {
            return Err(Error::not_supported(format!(
                "table '{full}': the Lance namespace at '{}' manages its versions (commits go \
                 through the namespace), which this crate does not support yet",
                self.spec.display_root()
            )));
        }
        let Some(location) = response.location else {
            return Err(Error::namespace(format!(
                "table '{full}': the Lance namespace at '{}' gave no location",
                self.spec.display_root()
            )));
        };
        Ok(Some(self.entry(location, response.storage_options)))
    }

    /// A table at `location` with the storage options `vended` by the
    /// namespace (the catalog's own options win over them).
    pub(crate) fn entry(
        &self,
        location: String,
        vended: Option<std::collections::HashMap<String, String>>,
    ) -> TableEntry {
        let mut storage_options: BTreeMap<String, String> =
            vended.unwrap_or_default().into_iter().collect();
        storage_options.extend(self.spec.table_storage_options());
        TableEntry {
            location,
            storage_options,
        }
    }

    /// Opens table `schema.table` stored as `entry` through the catalog's
    /// Lance session.
    pub(crate) async fn open(
        &self,
        schema: &str,
        table: &str,
        entry: &TableEntry,
    ) -> Result<LanceTableProvider> {
        let mut builder = LanceTableProvider::builder(entry.location.clone())
            .with_name(format!("{}.{schema}.{table}", self.name));
        for (key, value) in &entry.storage_options {
            builder = builder.with_storage_option(key, value);
        }
        builder.build_with(&self.cache).await
    }

    /// Lists the namespace again.
    pub(crate) async fn refresh(&self) -> Result<()> {
        let mut listing = BTreeMap::new();
        listing.insert(self.root_schema.clone(), self.list_tables(vec![]).await?);
        if self.spec.kind == NamespaceKind::Cloud {
            // LanceDB databases are listed as one schema: their tables.
            *self.listing.write().expect("listing lock") = listing;
            return Ok(());
        }
        let children = self
            .namespace
            .list_namespaces(ListNamespacesRequest {
                id: Some(vec![]),
                ..Default::default()
            })
            .await
            .map_err(|e| self.spec.error("listing namespaces", e))?;
        for child in children.namespaces {
            let tables = self.list_tables(vec![child.clone()]).await?;
            listing.insert(child, tables);
        }
        *self.listing.write().expect("listing lock") = listing;
        Ok(())
    }

    async fn list_tables(&self, id: Vec<String>) -> Result<BTreeSet<String>> {
        let mut tables = BTreeSet::new();
        let mut page_token = None;
        loop {
            let response = self
                .namespace
                .list_tables(ListTablesRequest {
                    id: Some(id.clone()),
                    page_token: page_token.take(),
                    include_declared: Some(false),
                    ..Default::default()
                })
                .await
                .map_err(|e| self.spec.error("listing tables", e))?;
            tables.extend(response.tables);
            match response.page_token {
                Some(token) if !token.is_empty() => page_token = Some(token),
                _ => return Ok(tables),
            }
        }
    }

    fn listed(&self, schema: &str) -> Vec<String> {
        let listing = self.listing.read().expect("listing lock");
        listing
            .get(schema)
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// A catalog whose schemas and tables are those of a Lance namespace (see
/// [`register_lance_catalog`] and the crate docs' "Catalogs").
#[derive(Debug)]
pub struct LanceCatalog {
    pub(crate) lake: Arc<Lake>,
}

impl LanceCatalog {
    /// The namespace behind the catalog.
    pub fn spec(&self) -> &NamespaceSpec {
        &self.lake.spec
    }

    /// Lists the namespace again (see [`refresh_lance_catalogs`]).
    pub async fn refresh(&self) -> Result<()> {
        self.lake.refresh().await
    }
}

impl CatalogProvider for LanceCatalog {
    fn schema_names(&self) -> Vec<String> {
        let listing = self.lake.listing.read().expect("listing lock");
        listing.keys().cloned().collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        // Any name: a namespace another process created since the last
        // listing is found when its tables are looked up.
        Some(Arc::new(LanceSchema {
            lake: Arc::clone(&self.lake),
            name: name.to_string(),
        }))
    }

    fn register_schema(
        &self,
        name: &str,
        _schema: Arc<dyn SchemaProvider>,
    ) -> DFResult<Option<Arc<dyn SchemaProvider>>> {
        fail!(
            not_supported,
            "CREATE SCHEMA {}.{name}: schemas of the Lance catalog '{}' are created by lance_sql \
             or lance-sql (DataFusion's own planner would make an in-memory schema)",
            self.lake.name,
            self.lake.name
        )
    }

    fn deregister_schema(
        &self,
        name: &str,
        _cascade: bool,
    ) -> DFResult<Option<Arc<dyn SchemaProvider>>> {
        fail!(
            not_supported,
            "DROP SCHEMA {}.{name}: schemas of the Lance catalog '{}' are dropped by lance_sql \
             or lance-sql",
            self.lake.name,
            self.lake.name
        )
    }
}

/// One namespace of a [`LanceCatalog`].
#[derive(Debug)]
pub(crate) struct LanceSchema {
    lake: Arc<Lake>,
    name: String,
}

impl LanceSchema {
    /// Table `name` of a LanceDB catalog, opened through the service.
    async fn cloud_table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if !can_look_up(&self.name) || !can_look_up(name) {
            return Ok(None);
        }
        let options = self
            .lake
            .spec
            .cloud_table(&self.lake.namespace_id(&self.name), name)?;
        let full = format!("{}.{}.{name}", self.lake.name, self.name);
        match CloudTableProvider::open(full, options).await {
            Ok(table) => Ok(Some(Arc::new(table))),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl SchemaProvider for LanceSchema {
    fn table_names(&self) -> Vec<String> {
        self.lake.listed(&self.name)
    }

    async fn table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if self.lake.spec.kind == NamespaceKind::Cloud {
            return self.cloud_table(name).await;
        }
        let Some(entry) = self.lake.describe(&self.name, name).await? else {
            return Ok(None);
        };
        let table = self.lake.open(&self.name, name, &entry).await?;
        Ok(Some(Arc::new(table)))
    }

    async fn table_type(&self, _name: &str) -> DFResult<Option<TableType>> {
        // Listing opens no table.
        Ok(Some(TableType::Base))
    }

    fn register_table(
        &self,
        name: String,
        _table: Arc<dyn TableProvider>,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        fail!(
            not_supported,
            "CREATE TABLE {}.{}.{name}: tables of the Lance catalog '{}' are created by lance_sql \
             or lance-sql (DataFusion's own planner would make an in-memory table)",
            self.lake.name,
            self.name,
            self.lake.name
        )
    }

    fn deregister_table(&self, name: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        fail!(
            not_supported,
            "DROP TABLE {}.{}.{name}: tables of the Lance catalog '{}' are dropped by lance_sql \
             or lance-sql",
            self.lake.name,
            self.name,
            self.lake.name
        )
    }

    fn table_exist(&self, name: &str) -> bool {
        let listing = self.lake.listing.read().expect("listing lock");
        listing.get(&self.name).is_some_and(|t| t.contains(name))
    }
}

/// Registers the Lance namespace at `root` as catalog `name` of `ctx`:
/// `SELECT * FROM name.public.t` reads table `t` of the root namespace,
/// `name.db.t` table `t` of child namespace `db`.
///
/// `root` is a directory namespace's root (a local path or object-store
/// URL), or `rest+http://host:port` / `rest+https://…` for a Lance REST
/// namespace server. `storage_options` reach the namespace and every table
/// in it; for a REST namespace, `header.<name>`, `tls.*` and `delimiter`
/// configure the client instead (e.g. `header.Authorization`) and are sent
/// to the server only.
pub async fn register_lance_catalog(
    ctx: &SessionContext,
    name: &str,
    root: &str,
    storage_options: BTreeMap<String, String>,
) -> Result<Arc<LanceCatalog>> {
    check_new(NameKind::Catalog, name)?;
    let spec = NamespaceSpec::new(root, storage_options)?;
    let state = ctx.state();
    let cache = LanceSessionCache::for_config(state.config());
    let namespace = spec.connect(&cache).await?;
    let root_schema = state.config_options().catalog.default_schema.clone();
    let lake = Arc::new(Lake {
        name: name.to_string(),
        spec,
        root_schema,
        namespace,
        cache,
        listing: RwLock::default(),
    });
    lake.refresh().await?;
    let catalog = Arc::new(LanceCatalog {
        lake: Arc::clone(&lake),
    });
    ctx.register_catalog(name, Arc::clone(&catalog) as Arc<dyn CatalogProvider>);
    let lakes = state.config().get_extension::<Lakes>().unwrap_or_default();
    lakes
        .0
        .write()
        .expect("catalogs lock")
        .insert(name.to_string(), lake);
    let hook = CatalogTablesHook(Arc::clone(&lakes) as Arc<dyn CatalogTables>);
    let shared = ctx.state_ref();
    let mut writing = shared.write();
    writing.config_mut().set_extension(lakes);
    writing.config_mut().set_extension(Arc::new(hook));
    drop(writing);
    let io = state
        .config()
        .get_extension::<IoCatalogs>()
        .unwrap_or_default();
    io.add(name);
    ctx.state_ref().write().config_mut().set_extension(io);
    Ok(catalog)
}

/// The Lance catalogs registered on a context, by name. (Catalog lists such
/// as datafusion-cli's wrap the catalogs they hand out, so a catalog cannot
/// be recognised by its type.)
#[derive(Debug, Default)]
pub(super) struct Lakes(RwLock<BTreeMap<String, Arc<Lake>>>);

impl Lakes {
    /// The Lance catalog registered as `name`.
    pub(super) fn named(&self, name: &str) -> Option<Arc<Lake>> {
        self.0.read().expect("catalogs lock").get(name).cloned()
    }
}

/// Lists every Lance catalog of `ctx` again, so that `SHOW TABLES` and
/// `information_schema` see tables other processes created or dropped.
pub async fn refresh_lance_catalogs(ctx: &SessionContext) -> Result<()> {
    refresh_catalogs_of(&ctx.state()).await
}

/// [`refresh_lance_catalogs`] on a session state.
pub(crate) async fn refresh_catalogs_of(
    state: &datafusion::execution::session_state::SessionState,
) -> Result<()> {
    for lake in lakes(state) {
        lake.refresh().await?;
    }
    Ok(())
}

/// The Lance catalogs of `state`.
pub(crate) fn lakes(state: &datafusion::execution::session_state::SessionState) -> Vec<Arc<Lake>> {
    let Some(lakes) = state.config().get_extension::<Lakes>() else {
        return vec![];
    };
    let names = lakes
        .0
        .read()
        .expect("catalogs lock")
        .keys()
        .cloned()
        .collect::<Vec<_>>();
    names
        .iter()
        .filter_map(|name| lance_catalog(state, name))
        .collect()
}

/// The Lance catalog that table `reference` belongs to, if any.
pub(crate) fn lance_catalog_of(
    state: &datafusion::execution::session_state::SessionState,
    reference: &datafusion::common::TableReference,
) -> Option<Arc<Lake>> {
    let defaults = &state.config_options().catalog;
    let resolved = reference
        .clone()
        .resolve(&defaults.default_catalog, &defaults.default_schema);
    lance_catalog(state, &resolved.catalog)
}

/// The Lance catalog `name` of `state`, if it is one.
pub(crate) fn lance_catalog(
    state: &datafusion::execution::session_state::SessionState,
    name: &str,
) -> Option<Arc<Lake>> {
    // Still registered under that name (not replaced since).
    state.catalog_list().catalog(name)?;
    let lakes = state.config().get_extension::<Lakes>()?;
    let lakes = lakes.0.read().expect("catalogs lock");
    lakes.get(name).cloned()
}
