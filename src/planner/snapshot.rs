//! [`LanceQueryPlanner`]: every reference to a Lance table in one statement
//! reads one version.
//!
//! DataFusion plans the leaves of a physical plan concurrently, and each
//! provider's `scan` would otherwise look up the latest version on its own: a
//! self-join, `(SELECT count(*) FROM t) - (SELECT count(*) FROM t)` or a
//! `DELETE ... WHERE id IN (SELECT ... FROM t)` racing a commit could read two
//! versions. This query planner wraps the session's own: before physical
//! planning starts it resolves the latest version of every unpinned Lance
//! table the statement references — scans, subqueries, DML targets and the
//! plans nested inside DML and merge statements — once per table, and hands
//! the rest of planning providers fixed to those versions. A `db://` table
//! is asked for its latest version once (`describe`) in the same way.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::datasource::file_format::{
    FileFormatFactory, file_type_to_format, format_as_file_type,
};
use datafusion::datasource::{DefaultTableSource, TableProvider, provider_as_source};
use datafusion::error::Result as DFResult;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::dml::CopyTo;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, TableScan, TableSource};
use datafusion::physical_plan::ExecutionPlan;
use futures::FutureExt;
use futures::future::BoxFuture;
use lance::Dataset;
use lance_io::object_store::ObjectStoreParams;

use crate::config::VersionSpec;
use crate::format::LanceFormatFactory;
use crate::table::LanceTableProvider;
use crate::table::cloud::CloudTableProvider;
use crate::table::statement::{Pinner, statement};

/// Resolves every Lance table a statement references to one version, then
/// delegates to the wrapped planner (see the module docs).
#[derive(Debug)]
pub struct LanceQueryPlanner {
    inner: Arc<dyn QueryPlanner + Send + Sync>,
}

impl LanceQueryPlanner {
    /// Wraps `inner` (the session's previous query planner).
    pub fn new(inner: Arc<dyn QueryPlanner + Send + Sync>) -> Self {
        Self { inner }
    }
}

#[async_trait]
impl QueryPlanner for LanceQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &SessionState,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let plan = resolve_lance_tables(logical_plan.clone(), session_state).await?;
        self.inner.create_physical_plan(&plan, session_state).await
    }
}

/// Resolves `plan` the way [`LanceQueryPlanner`] does before physical
/// planning: every unpinned Lance table it references — nested plans of DML
/// and merge statements included — is fixed to one version (the latest, once
/// per table), the tables `lance_merge`, the metadata functions
/// (`lance_versions`, ...) and `lance_vacuum` name are looked up, and the plans nested inside statements
/// are optimized (so subqueries become joins that `datafusion-proto` can
/// encode). Then an `ORDER BY <distance> LIMIT k` over an indexed vector
/// column reads from the index (see the README, "Vector distances").
///
/// Call it on a logical plan before encoding it for another process (see
/// [`crate::LanceLogicalCodec`]): the decoded plan then reads exactly these versions and
/// needs no catalog. Resolving a resolved plan changes nothing.
pub async fn resolve_lance_tables(
    plan: LogicalPlan,
    state: &SessionState,
) -> DFResult<LogicalPlan> {
    let plan = Snapshots::default().fix(plan, state).await?;
    super::ann::use_vector_indexes(plan, state).await
}

/// Identifies one table as the process sees it: location, store parameters
/// and the Lance session it is opened through.
#[derive(PartialEq, Eq, Hash)]
struct TableKey {
    uri: String,
    params: ObjectStoreParams,
    cache: usize,
}

/// The versions resolved for one statement.
#[derive(Default)]
struct Snapshots {
    datasets: HashMap<TableKey, Arc<Dataset>>,
    /// `db://` tables (by service and table) and the version read.
    cloud: HashMap<(String, String), u64>,
}

impl Snapshots {
    /// The version of `table` this statement reads (resolved on first use).
    async fn dataset(
        &mut self,
        table: &LanceTableProvider,
        state: &SessionState,
    ) -> DFResult<Arc<Dataset>> {
        let cache = table.session_cache(state);
        let key = TableKey {
            uri: table.uri().to_string(),
            params: table.store_params().clone(),
            cache: Arc::as_ptr(&cache) as usize,
        };
        if let Some(dataset) = self.datasets.get(&key) {
            return Ok(Arc::clone(dataset));
        }
        let dataset = cache
            .open(table.uri(), table.store_params(), &VersionSpec::Latest)
            .await?;
        self.datasets.insert(key, Arc::clone(&dataset));
        Ok(dataset)
    }

    /// `provider` fixed to this statement's versions, or `None` when it is not
    /// a Lance table (or statement) that needs one.
    fn fix_provider<'a>(
        &'a mut self,
        provider: &'a Arc<dyn TableProvider>,
        state: &'a SessionState,
    ) -> BoxFuture<'a, DFResult<Option<Arc<dyn TableProvider>>>> {
        async move {
            if let Some(table) = provider.downcast_ref::<CloudTableProvider>() {
                if !table.needs_snapshot() {
                    return Ok(None);
                }
                return Ok(Some(Arc::new(self.fix_cloud(table).await?) as _));
            }
            if let Some(table) = provider.downcast_ref::<LanceTableProvider>() {
                if !table.needs_snapshot() {
                    return Ok(None);
                }
                let dataset = self.dataset(table, state).await?;
                return Ok(Some(Arc::new(table.at_snapshot(dataset)) as _));
            }
            match statement(provider.as_ref()) {
                Some(statement) => {
                    let mut pinner = Pinning {
                        snapshots: self,
                        state,
                    };
                    statement.pin(&mut pinner, state).await
                }
                None => Ok(None),
            }
        }
        .boxed()
    }

    /// `table` (a `db://` table that needs one) at this statement's version
    /// of it (asked for on first use).
    async fn fix_cloud(&mut self, table: &CloudTableProvider) -> DFResult<CloudTableProvider> {
        let key = table.service_key();
        let version = match self.cloud.get(&key) {
            Some(version) => *version,
            None => {
                let version = table.latest_version().await?;
                self.cloud.insert(key, version);
                version
            }
        };
        Ok(table.read_at(version))
    }

    async fn fix_table(
        &mut self,
        table: &Arc<LanceTableProvider>,
        state: &SessionState,
    ) -> DFResult<Arc<LanceTableProvider>> {
        if !table.needs_snapshot() {
            return Ok(Arc::clone(table));
        }
        let dataset = self.dataset(table, state).await?;
        Ok(Arc::new(table.at_snapshot(dataset)))
    }

    /// `plan` with every Lance table it references fixed to one version.
    fn fix<'a>(
        &'a mut self,
        plan: LogicalPlan,
        state: &'a SessionState,
    ) -> BoxFuture<'a, DFResult<LogicalPlan>> {
        async move {
            // Resolve first (async), then rewrite (sync), provider by provider.
            let mut fixed: Vec<(usize, Arc<dyn TableProvider>)> = Vec::new();
            for provider in providers(&plan)? {
                if let Some(new) = self.fix_provider(&provider, state).await? {
                    fixed.push((provider_id(&provider), new));
                }
            }
            if fixed.is_empty() && !copies_to_lance(&plan)? {
                return Ok(plan);
            }
            let replace = |source: &Arc<dyn TableSource>| -> Option<Arc<dyn TableSource>> {
                let provider = &source.downcast_ref::<DefaultTableSource>()?.table_provider;
                let id = provider_id(provider);
                fixed
                    .iter()
                    .find(|(old, _)| *old == id)
                    .map(|(_, new)| provider_as_source(Arc::clone(new)))
            };
            plan.transform_up_with_subqueries(|node| match node {
                LogicalPlan::TableScan(scan) => match replace(&scan.source) {
                    Some(source) => Ok(Transformed::yes(LogicalPlan::TableScan(TableScan {
                        source,
                        ..scan
                    }))),
                    None => Ok(Transformed::no(LogicalPlan::TableScan(scan))),
                },
                LogicalPlan::Dml(dml) => match replace(&dml.target) {
                    Some(target) => Ok(Transformed::yes(LogicalPlan::Dml(DmlStatement {
                        target,
                        ..dml
                    }))),
                    None => Ok(Transformed::no(LogicalPlan::Dml(dml))),
                },
                LogicalPlan::Copy(copy) => fix_copy(copy),
                other => Ok(Transformed::no(other)),
            })
            .map(|t| t.data)
        }
        .boxed()
    }
}

/// The Lance format factory of a `COPY`, when it writes Lance.
fn lance_format(copy: &CopyTo) -> Option<Arc<dyn FileFormatFactory>> {
    let factory = file_type_to_format(&copy.file_type).ok()?;
    factory.is::<LanceFormatFactory>().then_some(factory)
}

/// True when `plan` holds a `COPY ... STORED AS LANCE` not resolved yet.
fn copies_to_lance(plan: &LogicalPlan) -> DFResult<bool> {
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Copy(copy) = node
            && let Some(factory) = lance_format(copy)
            && factory
                .downcast_ref::<LanceFormatFactory>()
                .is_some_and(|f| f.copy_options().is_none())
        {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

/// A `COPY ... STORED AS LANCE` with its options moved into its format
/// factory, where they travel with an encoded plan.
fn fix_copy(copy: CopyTo) -> DFResult<Transformed<LogicalPlan>> {
    let unresolved = lance_format(&copy).is_some_and(|factory| {
        factory
            .downcast_ref::<LanceFormatFactory>()
            .is_some_and(|f| f.copy_options().is_none())
    });
    if !unresolved {
        return Ok(Transformed::no(LogicalPlan::Copy(copy)));
    }
    let options = LanceFormatFactory::parse_options(&copy.options)?;
    let factory: Arc<dyn FileFormatFactory> = Arc::new(LanceFormatFactory::with_options(options));
    Ok(Transformed::yes(LogicalPlan::Copy(CopyTo {
        file_type: format_as_file_type(factory),
        options: Default::default(),
        ..copy
    })))
}

fn provider_id(provider: &Arc<dyn TableProvider>) -> usize {
    Arc::as_ptr(provider) as *const () as usize
}

/// The distinct table providers `plan` scans or writes (subqueries included).
fn providers(plan: &LogicalPlan) -> DFResult<Vec<Arc<dyn TableProvider>>> {
    let mut found: Vec<Arc<dyn TableProvider>> = Vec::new();
    let mut add = |source: &Arc<dyn TableSource>| {
        if let Some(source) = source.downcast_ref::<DefaultTableSource>() {
            let provider = &source.table_provider;
            if !found.iter().any(|p| Arc::ptr_eq(p, provider)) {
                found.push(Arc::clone(provider));
            }
        }
    };
    plan.apply_with_subqueries(|node| {
        match node {
            LogicalPlan::TableScan(scan) => add(&scan.source),
            LogicalPlan::Dml(dml) => add(&dml.target),
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(found)
}

/// Installs [`LanceQueryPlanner`] around the session's query planner (call
/// once per session).
pub(crate) fn install(state: &mut SessionState) {
    let inner = Arc::clone(state.query_planner());
    let planner = Arc::new(LanceQueryPlanner::new(inner));
    *state = datafusion::execution::SessionStateBuilder::new_from_existing(state.clone())
        .with_session_id(state.session_id().to_string())
        .with_query_planner(planner)
        .build();
}

/// A statement's tables and nested plans fixed through one [`Snapshots`].
struct Pinning<'a> {
    snapshots: &'a mut Snapshots,
    state: &'a SessionState,
}

#[async_trait]
impl Pinner for Pinning<'_> {
    async fn table(
        &mut self,
        table: &Arc<LanceTableProvider>,
    ) -> DFResult<Arc<LanceTableProvider>> {
        self.snapshots.fix_table(table, self.state).await
    }

    async fn cloud_table(
        &mut self,
        table: &Arc<CloudTableProvider>,
    ) -> DFResult<Arc<CloudTableProvider>> {
        if !table.needs_snapshot() {
            return Ok(Arc::clone(table));
        }
        Ok(Arc::new(self.snapshots.fix_cloud(table).await?))
    }

    async fn plan(&mut self, plan: &LogicalPlan) -> DFResult<LogicalPlan> {
        let optimized = self.state.optimize(plan)?;
        self.snapshots.fix(optimized, self.state).await
    }
}
