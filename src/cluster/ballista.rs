//! Lance on an [Apache DataFusion Ballista] 54.1 cluster: the codecs,
//! settings and sessions of its clients, scheduler and executors.
//!
//! A Ballista client ships each statement's logical plan to the scheduler;
//! the scheduler plans it physically and ships stages to executors:
//!
//! * the **client** ([`connect`]) resolves every Lance table of a statement
//!   to one version before the plan leaves it (as [`crate::LanceQueryPlanner`]
//!   does in one process), so all tasks of a statement read one snapshot;
//! * the **scheduler** ([`scheduler_config`]) decodes the plan, plans the
//!   Lance scans over fragment groups, the parallel writers and the single
//!   commit, and splits them into stages;
//! * each **executor** ([`executor_config`]) decodes its tasks and runs them:
//!   scans read their fragment ids, writers write fragments, the commit
//!   stage commits what the writers' output rows name, once.
//!
//! The `lance-cluster` binary runs a scheduler or an executor with these
//! settings; `lance-sql --cluster df://HOST:PORT` is a client.
//!
//! [Apache DataFusion Ballista]: https://datafusion.apache.org/ballista/

use std::sync::Arc;

use ::ballista::prelude::SessionContextExt;
use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::extension::SessionConfigExt;
use ballista_core::planner::BallistaQueryPlanner;
use ballista_core::registry::BallistaFunctionRegistry;
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use ballista_core::utils::default_session_builder;
use ballista_executor::executor_process::ExecutorProcessConfig;
use ballista_scheduler::config::SchedulerConfig;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::{ComposedPhysicalExtensionCodec, PhysicalExtensionCodec};
use datafusion_proto::protobuf::LogicalPlanNode;

use crate::codec::{LanceLogicalCodec, LancePhysicalCodec};
use crate::config::LanceConfig;
use crate::planner::LanceQueryPlanner;

use super::SpreadWriters;

/// The logical codec of a Lance cluster: Lance's providers, then Ballista's
/// own nodes and file formats.
pub fn logical_codec() -> Arc<dyn LogicalExtensionCodec> {
    Arc::new(
        LanceLogicalCodec::new().with_fallback(Arc::new(BallistaLogicalExtensionCodec::default())),
    )
}

/// The physical codec of a Lance cluster: Lance's nodes, then Ballista's
/// (shuffle readers and writers).
pub fn physical_codec() -> Arc<dyn PhysicalExtensionCodec> {
    // Lance first: an empty blob at position 0 encodes as zero bytes, so the
    // built-in functions are still found by name when decoded.
    Arc::new(ComposedPhysicalExtensionCodec::new(vec![
        Arc::new(LancePhysicalCodec::new()),
        Arc::new(BallistaPhysicalExtensionCodec::default()),
    ]))
}

/// `config` ready for a Lance cluster: Ballista's settings, the `lance.*`
/// settings (so `SET lance.…` on a client reaches the scheduler and the
/// executors) and the Lance codecs.
pub fn cluster_config(config: SessionConfig) -> SessionConfig {
    let mut config = config.upgrade_for_ballista();
    if config.options().extensions.get::<LanceConfig>().is_none() {
        config = config.with_option_extension(LanceConfig::default());
    }
    config
        .with_ballista_logical_extension_codec(logical_codec())
        .with_ballista_physical_extension_codec(physical_codec())
}

/// The session a scheduler plans a job in: Ballista's defaults with Lance
/// registered (planning hooks, table functions, the shared Lance session)
/// and writers in their own stage ([`SpreadWriters`]).
pub fn scheduler_session(config: SessionConfig) -> DFResult<SessionState> {
    let ctx = SessionContext::new_with_state(default_session_builder(config)?);
    crate::register_lance(&ctx)?;
    Ok(SessionStateBuilder::new_from_existing(ctx.state())
        .with_physical_optimizer_rule(Arc::new(SpreadWriters))
        .build())
}

/// A scheduler configuration with the Lance codecs, settings and session
/// builder; set its bind address and port before starting it.
pub fn scheduler_config() -> SchedulerConfig {
    let mut config = SchedulerConfig::default()
        .with_scheduler_policy(TaskSchedulingPolicy::PullStaged)
        .with_override_config_producer(Arc::new(|| {
            cluster_config(SessionConfig::new_with_ballista())
        }))
        .with_override_session_builder(Arc::new(scheduler_session));
    config.override_logical_codec = Some(logical_codec());
    config.override_physical_codec = Some(physical_codec());
    config
}

/// An executor configuration with the Lance codecs and settings; set its
/// addresses and the scheduler's before starting it. Tasks open Lance tables
/// through this process's shared Lance session.
pub fn executor_config() -> ExecutorProcessConfig {
    ExecutorProcessConfig {
        override_config_producer: Some(Arc::new(|| {
            cluster_config(SessionConfig::new_with_ballista())
        })),
        override_logical_codec: Some(logical_codec()),
        override_physical_codec: Some(physical_codec()),
        override_function_registry: Some(Arc::new(function_registry())),
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        ..Default::default()
    }
}

/// The functions an executor decodes tasks with: DataFusion's — its array
/// functions (`make_array`, ...) included, which Ballista's default registry
/// leaves out — and Lance's.
fn function_registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    let defaults = datafusion::execution::SessionStateDefaults::default_scalar_functions();
    for function in defaults
        .into_iter()
        .chain(crate::functions::scalar_functions())
    {
        registry
            .scalar_functions
            .insert(function.name().to_string(), function);
    }
    registry
}

/// The scheduler address of a `df://HOST:PORT` URL as Ballista's client
/// wants it (`http://HOST:PORT`).
fn scheduler_url(url: &str) -> DFResult<String> {
    let parsed = url::Url::parse(url)
        .map_err(|e| DataFusionError::Configuration(format!("cluster URL '{url}': {e}")))?;
    if parsed.scheme() != "df" {
        return Err(DataFusionError::Configuration(format!(
            "cluster URL '{url}': expected df://HOST:PORT"
        )));
    }
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port()) else {
        return Err(DataFusionError::Configuration(format!(
            "cluster URL '{url}': expected df://HOST:PORT"
        )));
    };
    Ok(format!("http://{host}:{port}"))
}

/// A client context on the Ballista cluster at `url` (`df://HOST:PORT`),
/// from `state` (a state with Lance registered, e.g. from
/// [`crate::lance_session_state`]): every statement runs on the cluster, its
/// Lance tables resolved to one version here first. DDL (`CREATE EXTERNAL
/// TABLE`, `SET`) applies to this client's session and travels with each
/// statement.
pub async fn connect(url: &str, state: SessionState) -> DFResult<SessionContext> {
    let scheduler = scheduler_url(url)?;
    let config = cluster_config(state.config().clone());
    let ballista = config.ballista_config();
    let planner = BallistaQueryPlanner::<LogicalPlanNode>::with_extension(
        scheduler,
        ballista,
        logical_codec(),
    );
    let config =
        config.with_ballista_query_planner(Arc::new(LanceQueryPlanner::new(Arc::new(planner))));
    let state = SessionStateBuilder::new_from_existing(state)
        .with_config(config)
        .build();
    let ctx = SessionContext::remote_with_state(url, state).await?;
    // Ballista's client state keeps only its own scalar functions.
    for function in crate::functions::scalar_functions() {
        ctx.register_udf(function.as_ref().clone());
    }
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballista_core::config::BallistaConfig;

    #[test]
    fn cluster_urls_name_host_and_port() {
        assert_eq!(
            scheduler_url("df://127.0.0.1:50050").unwrap(),
            "http://127.0.0.1:50050"
        );
        for bad in ["http://127.0.0.1:50050", "df://127.0.0.1", "127.0.0.1:1"] {
            let error = scheduler_url(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }

    #[test]
    fn lance_settings_reach_cluster_sessions() {
        let mut config = cluster_config(SessionConfig::new());
        config
            .options_mut()
            .set("lance.max_rows_per_file", "7")
            .unwrap();
        assert!(
            config
                .options()
                .extensions
                .get::<BallistaConfig>()
                .is_some()
        );
        let state = scheduler_session(config).unwrap();
        let settings = LanceConfig::from_options(state.config().options());
        assert_eq!(settings.max_rows_per_file, 7);
    }
}
