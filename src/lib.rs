#![doc = include_str!("tour.md")]

pub mod cancel;
mod catalog;
mod cloud;
pub mod cluster;
mod codec;
mod config;
mod error;
mod format;
mod location;
mod name;
pub mod physical_plan;
mod planner;
pub mod progress;
#[cfg(feature = "server")]
pub mod server;
mod session;
mod table;
mod udf;
mod udtf;

use std::sync::Arc;

use datafusion::execution::SessionStateBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::AnalyzerRule;
use datafusion::prelude::{SessionConfig, SessionContext};

// The root: what most programs need. Everything else public has one home,
// in the modules below (the list is checked by `tests/integration/api.rs`).
pub use catalog::{LanceCatalog, register_lance_catalog};
pub use codec::{LanceLogicalCodec, LancePhysicalCodec};
pub use config::{LanceConfig, LanceTableOptions, VersionSpec};
pub use error::{Error, Result};
use functions::*;
use planner::Planned;
pub use planner::{
    LanceQueryPlanner, execute_lance_plan, plan_lance_sql, plan_sql, resolve_lance_tables,
    split_statements,
};
pub use session::LanceSessionCache;
use storage::LanceFormatFactory;
pub use table::{LanceTableProvider, LanceTableProviderBuilder, LanceTableProviderFactory};

/// The SQL functions this crate registers ([`register_lance`] registers them
/// all), each with the name SQL calls it by.
pub mod functions {
    pub use crate::physical_plan::merge_options::MERGE_FUNCTION_NAME;
    pub use crate::planner::time_travel::AS_OF_FUNCTION_NAME;
    pub use crate::udf::{
        L2_DISTANCE_FUNCTION_NAME, L2DistanceFunction, PERMUTATION_IDENTITY_FUNCTION_NAME,
        PermutationIdentityFunction, SESSION_STATS_FUNCTION_NAME, SessionStatsFunction,
        scalar_functions,
    };
    pub use crate::udtf::{
        BUILD_PERMUTATION_FUNCTION_NAME, BuildPermutationFunction, CACHE_STATS_FUNCTION_NAME,
        CREATE_INDEX_FUNCTION_NAME, CacheStatsFunction, DROP_INDEX_FUNCTION_NAME,
        FRAGMENTS_FUNCTION_NAME, FTS_FUNCTION_NAME, FtsFunction, HYBRID_SEARCH_FUNCTION_NAME,
        HybridSearchFunction, INDICES_FUNCTION_NAME, IndexFunction, MetadataFunction, MetadataKind,
        OPTIMIZE_FUNCTION_NAME, OptimizeFunction, PERMUTATION_FUNCTION_NAME, PermutationFunction,
        ROWS_FUNCTION_NAME, RowsFunction, TAG_FUNCTION_NAME, TAGS_FUNCTION_NAME, TagFunction,
        VACUUM_FUNCTION_NAME, VECTOR_SEARCH_FUNCTION_NAME, VERSIONS_FUNCTION_NAME, VacuumFunction,
        VectorSearchFunction,
    };
}

/// Settings beside [`LanceConfig`] and [`LanceTableOptions`]: commit budgets,
/// cache budgets, pushdown, defaults, and the options of a merge.
pub mod options {
    pub use crate::config::{
        CacheBudgets, CommitBudget, DEFAULT_COMMIT_MAX_RETRIES, DEFAULT_COMMIT_RETRY_TIMEOUT_MS,
        DEFAULT_STORAGE_VERSION, FilterPushdown,
    };
    pub use crate::physical_plan::merge_options::{
        MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched,
        WhenNotMatchedBySource,
    };
}

/// Catalogs beside [`LanceCatalog`]: the namespaces behind them, tables
/// named by URL, listing again.
pub mod catalogs {
    pub use crate::catalog::{
        LanceUrlTableFactory, NamespaceKind, NamespaceSpec, enable_lance_url_tables,
        refresh_lance_catalogs,
    };
}

/// Where tables live and how they are opened: locations, snapshots, object
/// store parameters, the shared Lance session's switches, and the `STORED AS
/// LANCE` format of `COPY`.
pub mod storage {
    pub use crate::config::{INDEX_CACHE_ENV, METADATA_CACHE_ENV};
    pub use crate::format::{LanceFormat, LanceFormatFactory};
    pub use crate::location::{
        InvalidLocation, Snapshot, TableLocation, normalize_uri, redact_uri,
    };
    pub use crate::session::{
        OpenerStats, SHARE_SESSION_ENV, session_sharing_disabled, store_params,
    };
}

/// The `STORED AS` name of Lance tables.
pub const LANCE_FORMAT: &str = "LANCE";

/// Registers everything this crate provides on `ctx`: the `STORED AS LANCE`
/// factory, the `lance.*` settings and table options, the shared Lance
/// session (unless the context already has a [`LanceSessionCache`]) and the
/// table functions.
///
/// Quoted-path tables (`SELECT * FROM '/data/t.lance'`) need a new context:
/// see [`catalogs::enable_lance_url_tables`].
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
        let analyzer = ctx.state().analyzer().rules.clone();
        let fold = planner::fold_number_arrays();
        if !analyzer.iter().any(|r| r.name() == fold.name()) {
            ctx.add_analyzer_rule(fold);
        }
        ctx.add_analyzer_rule(Arc::new(planner::VectorDimensionCheck::default()));
        ctx.add_analyzer_rule(Arc::new(planner::LanceDmlRewrite::default()));
        ctx.register_relation_planner(Arc::new(planner::LanceFunctionPlanner::default()))?;
        ctx.register_relation_planner(Arc::new(planner::LanceMergePlanner::default()))?;
        ctx.register_relation_planner(Arc::new(planner::VersionClauseGuard::default()))?;
    }
    ctx.register_udtf(
        CACHE_STATS_FUNCTION_NAME,
        Arc::new(CacheStatsFunction::default()),
    );
    for kind in MetadataKind::ALL {
        ctx.register_udtf(kind.function_name(), Arc::new(MetadataFunction::new(kind)));
    }
    ctx.register_udtf(VACUUM_FUNCTION_NAME, Arc::new(VacuumFunction::default()));
    ctx.register_udtf(
        BUILD_PERMUTATION_FUNCTION_NAME,
        Arc::new(BuildPermutationFunction::default()),
    );
    ctx.register_udtf(
        PERMUTATION_FUNCTION_NAME,
        Arc::new(PermutationFunction::default()),
    );
    ctx.register_udtf(FTS_FUNCTION_NAME, Arc::new(FtsFunction::default()));
    ctx.register_udtf(ROWS_FUNCTION_NAME, Arc::new(RowsFunction::default()));
    ctx.register_udtf(
        VECTOR_SEARCH_FUNCTION_NAME,
        Arc::new(VectorSearchFunction::default()),
    );
    ctx.register_udtf(
        HYBRID_SEARCH_FUNCTION_NAME,
        Arc::new(HybridSearchFunction::default()),
    );
    ctx.register_udtf(TAG_FUNCTION_NAME, Arc::new(TagFunction::default()));
    ctx.register_udtf(
        CREATE_INDEX_FUNCTION_NAME,
        Arc::new(IndexFunction::creating()),
    );
    ctx.register_udtf(
        DROP_INDEX_FUNCTION_NAME,
        Arc::new(IndexFunction::dropping()),
    );
    ctx.register_udtf(
        OPTIMIZE_FUNCTION_NAME,
        Arc::new(OptimizeFunction::default()),
    );
    ctx.register_udtf(
        AS_OF_FUNCTION_NAME,
        Arc::new(planner::time_travel::AsOfOutsideLanceSql::default()),
    );
    for function in scalar_functions() {
        ctx.register_udf(function.as_ref().clone());
    }
    Ok(())
}

fn register_on_state(state: &mut SessionState) {
    // Cannot fail with overwrite = true.
    let _ = state.register_file_format(Arc::new(LanceFormatFactory::default()), true);
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
    // Number arrays are folded before DataFusion's analysis (a rule
    // `register_lance` can only append).
    let analyzer_rules = std::iter::once(planner::fold_number_arrays())
        .chain(datafusion::optimizer::Analyzer::new().rules)
        .collect();
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .with_analyzer_rules(analyzer_rules)
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

    /// Like [`SessionContext::sql`], also accepting `MERGE INTO`, `CREATE
    /// INDEX` / `DROP INDEX` and `ALTER TABLE` on Lance tables and time
    /// travel (`VERSION AS OF`, `TIMESTAMP AS OF`, `lance_as_of(...)`),
    /// which DataFusion 54 cannot plan (see [`plan_lance_sql`]). Like
    /// DataFusion's DDL, `ALTER TABLE` runs right away and the table is
    /// registered again with its new schema (see [`execute_lance_plan`]).
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
        match planner::plan_statement(&state, sql).await? {
            // A query of this crate's (a search, time travel) becomes a
            // frame on the state it was planned with, as `execute_lance_plan`
            // would make it on a copy of the same state, made again.
            Planned::Ours(plan) if planner::is_query(&plan) => {
                Ok(datafusion::dataframe::DataFrame::new(state, *plan))
            }
            Planned::Ours(plan) => execute_lance_plan(self, *plan).await,
            Planned::DataFusions(plan) => match *plan {
                // DDL and statements change the context: they run now
                // (an `EXECUTE` of a statement prepared as its text is
                // planned here).
                plan @ (LogicalPlan::Ddl(_) | LogicalPlan::Statement(_)) => {
                    drop(state);
                    execute_lance_plan(self, plan).await
                }
                // A query (or DML) becomes a frame on the state it was
                // planned with, as `execute_logical_plan` would make it on a
                // copy of the same state, made again.
                plan => Ok(datafusion::dataframe::DataFrame::new(state, plan)),
            },
        }
    }
}
