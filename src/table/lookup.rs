//! From a table name to the Lance table: the one lookup `MERGE INTO`,
//! `lance_merge` and the table functions use.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{ResolvedTableReference, TableReference};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use futures::FutureExt;

use super::LanceTableProvider;
use super::cloud::CloudTableProvider;
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::{TableLocation, normalize_uri, redact_uri};
use crate::session::LanceSessionCache;

/// A table a statement changes: a Lance table or a `db://` one.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Lance(Arc<LanceTableProvider>),
    Cloud(Arc<CloudTableProvider>),
}

impl Target {
    /// The table's columns.
    pub(crate) fn schema(&self) -> SchemaRef {
        match self {
            Self::Lance(table) => table.schema(),
            Self::Cloud(table) => table.schema(),
        }
    }
}

/// The Lance or `db://` table `reference` names in `state`, if it is one.
pub(crate) async fn registered_target(
    state: &dyn Session,
    reference: &TableReference,
) -> DFResult<Option<Target>> {
    let Some(state) = state.as_any().downcast_ref::<SessionState>() else {
        return Ok(None);
    };
    let Ok(schema) = state.schema_for_ref(reference.clone()) else {
        return Ok(None);
    };
    let Some(table) = schema.table(reference.table()).await? else {
        return Ok(None);
    };
    let any: Arc<dyn std::any::Any + Send + Sync> = table;
    let any = match any.downcast::<CloudTableProvider>() {
        Ok(cloud) => return Ok(Some(Target::Cloud(cloud))),
        Err(other) => other,
    };
    Ok(any.downcast::<LanceTableProvider>().ok().map(Target::Lance))
}

/// The Lance table `reference` names in `state`: `None` when no table has
/// that name, or the table is not a Lance table; an error for a LanceDB
/// Cloud table, which this statement does not support.
pub(crate) async fn registered_lance_table(
    state: &dyn Session,
    reference: &TableReference,
) -> DFResult<Option<Arc<LanceTableProvider>>> {
    match registered_target(state, reference).await? {
        Some(Target::Lance(table)) => Ok(Some(table)),
        Some(Target::Cloud(cloud)) => Err(Error::not_supported(format!(
            "table '{reference}' ({}) is a LanceDB Cloud table: this statement is not \
             supported for it",
            cloud.display_uri()
        ))
        .into()),
        None => Ok(None),
    }
}

/// Lance and `db://` tables that table functions of one statement name, looked up
/// before the statement is planned ([`prefetch`]): table functions are
/// planned synchronously, and a catalog may need I/O to find a table.
#[derive(Debug, Default)]
pub(crate) struct Prefetched(Vec<(ResolvedTableReference, Option<Target>)>);

/// The catalogs of a session that look their tables up with I/O (Lance
/// namespace catalogs, which `register_lance_catalog` names here): a table
/// function planned synchronously cannot find their tables by itself.
#[derive(Debug, Default)]
pub(crate) struct IoCatalogs(std::sync::RwLock<std::collections::BTreeSet<String>>);

impl IoCatalogs {
    /// Adds catalog `name`.
    pub(crate) fn add(&self, name: &str) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
    }

    fn holds(&self, name: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }
}

impl Prefetched {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn resolved(state: &dyn Session, reference: &TableReference) -> ResolvedTableReference {
    let defaults = &state.config_options().catalog;
    reference
        .clone()
        .resolve(&defaults.default_catalog, &defaults.default_schema)
}

/// Looks up the Lance tables `names` name (`None` for a name that is no
/// Lance table), for [`registered_now`] while the statement is planned —
/// those it could not find at once itself: tables of catalogs that look
/// their tables up. (Nothing prefetched: the statement is planned on the
/// session state as it is, not on a copy.)
pub(crate) async fn prefetch(state: &SessionState, names: &[String]) -> DFResult<Prefetched> {
    let mut found = Prefetched::default();
    let io = state.config().get_extension::<IoCatalogs>();
    for name in names {
        let reference = TableReference::from(name.as_str());
        let full = resolved(state, &reference);
        let needs_io = io.as_ref().is_some_and(|io| io.holds(&full.catalog));
        // Found at once: `registered_now` finds it so too (or fails alike).
        if !needs_io
            && registered_target(state, &reference)
                .now_or_never()
                .is_some()
        {
            continue;
        }
        let table = registered_target(state, &reference).await?;
        found.0.push((full, table));
    }
    Ok(found)
}

/// The Lance or `db://` table `reference` names, found without waiting: a
/// table [`prefetch`]ed for the statement, or one its catalog has at hand
/// (tables registered in memory, as `CREATE EXTERNAL TABLE` makes them).
/// `None` when no table has that name or it is neither; an error when
/// finding it needs I/O (a table of a Lance namespace catalog, or of any
/// catalog that has to look it up), which only statements planned through
/// `lance_sql` / `lance-sql` do before planning.
pub(crate) fn registered_now(
    state: &dyn Session,
    reference: &TableReference,
) -> Result<Option<Target>> {
    let full = resolved(state, reference);
    if let Some(prefetched) = state.config().get_extension::<Prefetched>()
        && let Some((_, table)) = prefetched.0.iter().find(|(r, _)| *r == full)
    {
        return Ok(table.clone());
    }
    let needs_io = || {
        Error::not_supported(format!(
            "finding '{full}' needs I/O (catalog '{}' looks its tables up); a table function \
             can name it in statements run through lance_sql (LanceSessionContextExt) or \
             lance-sql, which look it up before planning",
            full.catalog
        ))
    };
    if state
        .config()
        .get_extension::<IoCatalogs>()
        .is_some_and(|io| io.holds(&full.catalog))
    {
        return Err(needs_io());
    }
    // A catalog that has the table at hand answers at once; one that would
    // wait for I/O is not waited for.
    match registered_target(state, reference).now_or_never() {
        Some(found) => found.map_err(Error::from),
        None => Err(needs_io()),
    }
}

/// The Lance table `reference` names, or an error naming it (`what` says
/// which statement needed it).
pub(crate) async fn lance_table(
    state: &dyn Session,
    reference: &TableReference,
    what: &str,
) -> Result<Arc<LanceTableProvider>> {
    match registered_lance_table(state, reference).await {
        Ok(Some(table)) => Ok(table),
        Err(e) if Error::find(&e).is_some() => Err(e.into()),
        _ => Err(Error::not_found(format!(
            "{what}: '{reference}' is not a registered Lance table"
        ))),
    }
}

/// Where the dataset a table function argument names lives: a registered
/// Lance table (its location, with its store parameters registered for the
/// tasks of this process), else a dataset location, which must hold a
/// dataset.
pub(crate) async fn table_or_location(
    state: &dyn Session,
    target: &str,
) -> DFResult<TableLocation> {
    let cache = LanceSessionCache::for_config(state.config());
    if let Some(table) = registered_lance_table(state, &TableReference::from(target)).await? {
        cache.register_params(table.location(), table.store_params());
        return Ok(table.location().clone());
    }
    let location = TableLocation::new(normalize_uri(target)?, Default::default());
    match cache
        .open(
            &location.uri,
            &cache.params_for(&location),
            &VersionSpec::Latest,
        )
        .await
    {
        Ok(_) => Ok(location),
        Err(Error::DatasetNotFound { .. }) => Err(Error::not_found(format!(
            "'{}' is neither a Lance table nor a Lance dataset location",
            redact_uri(target)
        ))
        .into()),
        Err(e) => Err(e.into()),
    }
}
