//! URL tables: `SELECT * FROM '/data/t.lance'`.
//!
//! [`LanceUrlTableFactory`] opens a quoted table name as a Lance dataset when
//! it is one, and otherwise hands it to DataFusion's own URL-table factory
//! (Parquet, CSV, JSON, ... files and directories).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::DynamicFileCatalog;
use datafusion::catalog::UrlTableFactory;
use datafusion::datasource::TableProvider;
use datafusion::datasource::dynamic_file::DynamicListTableFactory;
use datafusion::error::Result as DFResult;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::SessionContext;
use datafusion_session::SessionStore;

use crate::error::Error;
use crate::location::normalize_uri;
use crate::session::LanceSessionCache;
use crate::table::LanceTableProvider;

/// Resolves quoted table names: Lance datasets first, then DataFusion's
/// listing tables.
#[derive(Debug)]
pub struct LanceUrlTableFactory {
    listing: DynamicListTableFactory,
}

impl LanceUrlTableFactory {
    fn state(&self) -> Option<SessionState> {
        let session = self.listing.session_store().get_session().upgrade()?;
        let state = session.read();
        state.as_any().downcast_ref::<SessionState>().cloned()
    }
}

/// True when `url` names a Lance dataset worth trying: a local directory
/// holding `_versions`, a path ending in `.lance`, or an object-store URL.
fn looks_like_lance(url: &str) -> bool {
    if url.trim_end_matches('/').ends_with(".lance") {
        return true;
    }
    match normalize_uri(url) {
        Ok(u) if u.contains("://") => true,
        Ok(path) => Path::new(&path).join("_versions").is_dir(),
        Err(_) => false,
    }
}

#[async_trait]
impl UrlTableFactory for LanceUrlTableFactory {
    async fn try_new(&self, url: &str) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if looks_like_lance(url) {
            let cache = match self.state() {
                Some(state) => LanceSessionCache::for_config(state.config()),
                None => LanceSessionCache::shared(),
            };
            match LanceTableProvider::builder(url).build_with(&cache).await {
                Ok(provider) => return Ok(Some(Arc::new(provider))),
                // A `.lance` path that fails to open is reported as such;
                // anything else may still be a file DataFusion can read.
                Err(e @ Error::Lance { .. }) if url.trim_end_matches('/').ends_with(".lance") => {
                    return Err(e.into());
                }
                Err(_) => {}
            }
        }
        self.listing.try_new(url).await
    }
}

/// Lets `ctx` resolve quoted table names (`SELECT * FROM '/data/t.lance'`),
/// trying Lance before DataFusion's file formats. Returns the new context
/// (like [`SessionContext::enable_url_table`]).
pub fn enable_lance_url_tables(ctx: SessionContext) -> SessionContext {
    let current = Arc::clone(ctx.state().catalog_list());
    let factory = Arc::new(LanceUrlTableFactory {
        listing: DynamicListTableFactory::new(SessionStore::new()),
    });
    let catalog_list = Arc::new(DynamicFileCatalog::new(
        current,
        Arc::clone(&factory) as Arc<dyn UrlTableFactory>,
    ));
    let session_id = ctx.session_id();
    let ctx: SessionContext = SessionStateBuilder::new_from_existing(ctx.state())
        .with_session_id(session_id)
        .with_catalog_list(catalog_list)
        .build()
        .into();
    factory
        .listing
        .session_store()
        .with_state(ctx.state_weak_ref());
    ctx
}
