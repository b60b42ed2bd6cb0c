//! From a table name to the Lance table: the one lookup `MERGE INTO`,
//! `lance_merge` and the table functions use.

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::common::TableReference;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;

use super::LanceTableProvider;
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::{TableLocation, normalize_uri, redact_uri};
use crate::session::LanceSessionCache;

/// The Lance table `reference` names in `state`: `None` when no table has
/// that name, or the table is not a Lance table.
pub(crate) async fn registered_lance_table(
    state: &dyn Session,
    reference: &TableReference,
) -> DFResult<Option<Arc<LanceTableProvider>>> {
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
    Ok(any.downcast::<LanceTableProvider>().ok())
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
        _ => Err(Error::unsupported(format!(
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
        Err(Error::DatasetNotFound { .. }) => Err(Error::unsupported(format!(
            "'{}' is neither a Lance table nor a Lance dataset location",
            redact_uri(target)
        ))
        .into()),
        Err(e) => Err(e.into()),
    }
}
