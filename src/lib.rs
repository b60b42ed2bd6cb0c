//! Lance datasets as first-class SQL tables in [Apache DataFusion].
//!
//! [Apache DataFusion]: https://datafusion.apache.org
//!
//! # Quick start
//!
//! ```no_run
//! # async fn example() -> datafusion::error::Result<()> {
//! use datafusion::prelude::SessionContext;
//!
//! let ctx = SessionContext::new();
//! datafusion_lance::register_lance(&ctx)?;
//! ctx.sql("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '/data/t.lance'")
//!     .await?;
//! ctx.sql("SELECT count(*) FROM t WHERE id > 10").await?.show().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What you get
//!
//! * **Reads** through [`LanceTableProvider`]: each query pins one table
//!   version at planning time and every partition reads it; fragments are
//!   split into row-balanced groups, one per partition; projection, filters
//!   (those Lance evaluates exactly like DataFusion) and limits are pushed
//!   into the Lance scan; exact row counts answer `count(*)` from metadata.
//! * **DDL**: `CREATE EXTERNAL TABLE ... STORED AS LANCE LOCATION ... OPTIONS
//!   ('lance.version' '3')` through [`LanceTableProviderFactory`].
//! * **One Lance session per process** ([`LanceSessionCache`]): manifests are
//!   cached once however many contexts open a table; concurrent cold opens
//!   load each version once. `SELECT * FROM lance_cache_stats()` shows it.
//! * **Settings** (`SET lance.batch_size = 4096`, ...): [`LanceConfig`].
//!
//! # Errors
//!
//! Fallible functions return [`Result`] with the crate's [`Error`]; it
//! converts into [`DataFusionError`](datafusion::error::DataFusionError)
//! keeping Lance errors as downcastable sources.

pub mod catalog;
pub mod codec;
pub mod config;
pub mod error;
pub mod format;
pub mod location;
pub mod physical_plan;
pub mod planner;
pub mod session;
pub mod table;
pub mod udtf;

use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::{SessionConfig, SessionContext};

pub use catalog::{LanceUrlTableFactory, enable_lance_url_tables};
pub use codec::{LanceLogicalCodec, LancePhysicalCodec};
pub use config::{
    CacheBudgets, CommitBudget, FilterPushdown, LanceConfig, LanceTableOptions, VersionSpec,
};
pub use error::{Error, Result};
pub use location::{normalize_uri, redact_uri};
pub use physical_plan::merge_options::{
    MERGE_FUNCTION_NAME, MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched,
    WhenNotMatchedBySource,
};
pub use physical_plan::{LanceScanExec, LanceSink};
pub use planner::resolve_lance_tables;
pub use session::LanceSessionCache;
pub use table::{LanceTableProvider, LanceTableProviderBuilder, LanceTableProviderFactory};
pub use udtf::{CacheStatsFunction, VersionsFunction};

/// The `STORED AS` name of Lance tables.
pub const LANCE_FORMAT: &str = "LANCE";

/// Registers everything this crate provides on `ctx`: the `STORED AS LANCE`
/// factory, the `lance.*` settings and table options, the shared Lance
/// session (unless the context already has a [`LanceSessionCache`]) and the
/// table functions.
///
/// Quoted-path tables (`SELECT * FROM '/data/t.lance'`) need a new context:
/// see [`enable_lance_url_tables`].
pub fn register_lance(ctx: &SessionContext) -> Result<()> {
    {
        let state = ctx.state_ref();
        let mut state = state.write();
        register_on_state(&mut state);
    }
    ctx.register_table_options_extension(LanceTableOptions::default());
    // Registering twice must not install the planning hooks twice.
    let installed = ctx
        .state()
        .analyzer()
        .rules
        .iter()
        .any(|r| r.name() == planner::LanceDmlRewrite::default().name());
    if !installed {
        planner::snapshot::install(&mut ctx.state_ref().write());
        ctx.add_analyzer_rule(Arc::new(planner::VectorDimensionCheck::default()));
        ctx.add_analyzer_rule(Arc::new(planner::LanceDmlRewrite::default()));
        ctx.register_relation_planner(Arc::new(planner::LanceMergePlanner::default()))?;
        ctx.register_relation_planner(Arc::new(planner::VersionClauseGuard::default()))?;
    }
    ctx.register_udtf(
        udtf::CACHE_STATS_FUNCTION_NAME,
        Arc::new(CacheStatsFunction::default()),
    );
    ctx.register_udtf(
        udtf::VERSIONS_FUNCTION_NAME,
        Arc::new(VersionsFunction::default()),
    );
    ctx.register_udtf(
        udtf::VACUUM_FUNCTION_NAME,
        Arc::new(udtf::VacuumFunction::default()),
    );
    Ok(())
}

fn register_on_state(state: &mut SessionState) {
    // Cannot fail with overwrite = true.
    let _ = state.register_file_format(Arc::new(format::LanceFormatFactory::default()), true);
    state.table_factories_mut().insert(
        LANCE_FORMAT.to_string(),
        Arc::new(LanceTableProviderFactory::new()),
    );
    let config = state.config_mut();
    if config.options().extensions.get::<LanceConfig>().is_none() {
        config
            .options_mut()
            .extensions
            .insert(LanceConfig::default());
    }
    if config.get_extension::<LanceSessionCache>().is_none() {
        config.set_extension(LanceSessionCache::shared());
    }
}

/// A `SessionState` with DataFusion's defaults and Lance registered.
pub fn lance_session_state(config: SessionConfig) -> SessionState {
    let ctx = lance_session_context(config);
    ctx.state()
}

/// A `SessionContext` with DataFusion's defaults and Lance registered.
pub fn lance_session_context(config: SessionConfig) -> SessionContext {
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    let ctx = SessionContext::new_with_state(state);
    register_lance(&ctx).expect("registering Lance on a fresh context cannot fail");
    ctx
}

/// Extension methods on [`SessionContext`].
pub trait LanceSessionContextExt {
    /// Uses `cache` (for example a private Lance session) for every Lance
    /// table this context opens from now on.
    fn with_lance_session_cache(&self, cache: Arc<LanceSessionCache>);

    /// Like [`SessionContext::sql`], also accepting `MERGE INTO` on Lance
    /// tables (which DataFusion 54 cannot plan).
    fn lance_sql(
        &self,
        sql: &str,
    ) -> impl Future<Output = datafusion::error::Result<datafusion::dataframe::DataFrame>> + Send;
}

impl LanceSessionContextExt for SessionContext {
    fn with_lance_session_cache(&self, cache: Arc<LanceSessionCache>) {
        self.state_ref().write().config_mut().set_extension(cache);
    }

    async fn lance_sql(
        &self,
        sql: &str,
    ) -> datafusion::error::Result<datafusion::dataframe::DataFrame> {
        let state = self.state();
        match planner::merge_into::plan_merge_sql(&state, sql).await? {
            Some(plan) => self.execute_logical_plan(plan).await,
            None => self.sql(sql).await,
        }
    }
}
