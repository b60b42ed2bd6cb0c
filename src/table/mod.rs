//! [`LanceTableProvider`]: a Lance dataset as a DataFusion table.

pub(crate) mod create;
pub(crate) mod dml;
pub(crate) mod factory;
pub(crate) mod merge;
pub(crate) mod partition;
pub(crate) mod pushdown;
pub(crate) mod scan;
pub(crate) mod write;

use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::Constraints;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use lance::Dataset;
use lance_io::object_store::ObjectStoreParams;

use crate::config::{LanceTableOptions, VersionSpec};
use crate::error::{Error, Result};
use crate::session::{LanceSessionCache, normalize_uri, redact_uri, store_params};

pub use factory::LanceTableProviderFactory;

/// Name of the row-address column of DML scans.
pub(crate) const ROW_ADDR: &str = "_rowaddr";

/// The dataset resolved for one query (identified by DataFusion session id and
/// query start time), so every scan of the table in that query — self-joins
/// included — reads the same version.
struct SnapshotMemo {
    session_id: String,
    started: DateTime<Utc>,
    dataset: Arc<Dataset>,
}

/// A Lance dataset as a DataFusion table.
///
/// # Freshness
///
/// A provider registered at the *latest* version resolves the newest version
/// once per query, at planning time: every partition of that query (and every
/// other scan of the table in the same query) reads exactly that version, even
/// if a writer commits while the query runs. The next query sees the new
/// version. Thanks to the shared Lance session, re-resolving costs one listing
/// of the version directory and no manifest read when nothing changed.
///
/// A provider registered at a fixed version or tag always reads that version.
///
/// The schema is the one the table had when the provider was created;
/// re-register the table to see columns added later.
pub struct LanceTableProvider {
    name: String,
    uri: String,
    display_uri: String,
    params: ObjectStoreParams,
    version: VersionSpec,
    schema: SchemaRef,
    constraints: Option<Constraints>,
    options: LanceTableOptions,
    pinned: Option<Arc<Dataset>>,
    cache: Option<Arc<LanceSessionCache>>,
    memo: Arc<Mutex<Option<SnapshotMemo>>>,
    /// Expose Lance's row address as a trailing `_rowaddr` column (DML only).
    row_addr: bool,
}

impl fmt::Debug for LanceTableProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceTableProvider")
            .field("uri", &self.display_uri)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Builds a [`LanceTableProvider`].
#[derive(Debug, Clone)]
pub struct LanceTableProviderBuilder {
    name: Option<String>,
    uri: String,
    options: LanceTableOptions,
    params: Option<ObjectStoreParams>,
    cache: Option<Arc<LanceSessionCache>>,
}

impl LanceTableProviderBuilder {
    /// The table's name in messages (defaults to its location).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Reads version `version` (the provider becomes read-only for writes).
    pub fn with_version(mut self, version: u64) -> Self {
        self.options.version = VersionSpec::Version(version);
        self
    }

    /// Reads the version `tag` points to when the provider is built.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.options.version = VersionSpec::Tag(tag.into());
        self
    }

    /// Adds a Lance storage option (credentials, endpoint, region, ...).
    pub fn with_storage_option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options
            .storage_options
            .insert(key.into(), value.into());
        self
    }

    /// Uses parsed table options (version pin and storage options).
    pub fn with_table_options(mut self, options: LanceTableOptions) -> Self {
        self.options = options;
        self
    }

    /// Uses explicit Lance object-store parameters (for example with an
    /// object-store wrapper), replacing any storage options.
    pub fn with_store_params(mut self, params: ObjectStoreParams) -> Self {
        self.params = Some(params);
        self
    }

    /// Opens datasets through `cache` instead of the context's (or the
    /// process-wide) Lance session.
    pub fn with_session_cache(mut self, cache: Arc<LanceSessionCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Opens the dataset and builds the provider.
    pub async fn build(self) -> Result<LanceTableProvider> {
        let open_with = self.cache.clone().unwrap_or_else(LanceSessionCache::shared);
        self.build_with(&open_with).await
    }

    /// Builds, opening through `open_with` (the provider keeps only an
    /// explicitly configured cache).
    pub(crate) async fn build_with(
        self,
        open_with: &LanceSessionCache,
    ) -> Result<LanceTableProvider> {
        let uri = normalize_uri(&self.uri)?;
        let params = self
            .params
            .unwrap_or_else(|| store_params(&self.options.storage_options));
        let dataset = open_with.open(&uri, &params, &self.options.version).await?;
        let schema = Arc::new(Schema::from(dataset.schema()));
        let constraints = create::primary_key_constraints(dataset.schema(), &schema);
        let pinned = (!self.options.version.is_latest()).then_some(dataset);
        let display_uri = redact_uri(&uri);
        Ok(LanceTableProvider {
            name: self.name.unwrap_or_else(|| display_uri.clone()),
            display_uri,
            uri,
            params,
            version: self.options.version.clone(),
            schema,
            constraints,
            options: self.options,
            pinned,
            cache: self.cache,
            memo: Arc::new(Mutex::new(None)),
            row_addr: false,
        })
    }
}

impl LanceTableProvider {
    /// Starts building a provider for the dataset at `uri` (a local path,
    /// `file://` URL or object-store URL).
    pub fn builder(uri: impl Into<String>) -> LanceTableProviderBuilder {
        LanceTableProviderBuilder {
            name: None,
            uri: uri.into(),
            options: LanceTableOptions::default(),
            params: None,
            cache: None,
        }
    }

    /// Opens the latest version of the dataset at `uri` through the
    /// process-wide shared Lance session.
    pub async fn try_new(uri: impl Into<String>) -> Result<Self> {
        Self::builder(uri).build().await
    }

    /// The same table with Lance's row address as a trailing `_rowaddr`
    /// column, sharing this provider's per-query snapshot.
    pub(crate) fn with_row_addresses(&self) -> Self {
        let mut fields: Vec<_> = self.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(ROW_ADDR, DataType::UInt64, false)));
        Self {
            name: self.name.clone(),
            uri: self.uri.clone(),
            display_uri: self.display_uri.clone(),
            params: self.params.clone(),
            version: self.version.clone(),
            schema: Arc::new(Schema::new(fields)),
            constraints: None,
            options: self.options.clone(),
            pinned: self.pinned.clone(),
            cache: self.cache.clone(),
            memo: Arc::clone(&self.memo),
            row_addr: true,
        }
    }

    fn dml_needs_registration(&self, statement: &str) -> datafusion::error::DataFusionError {
        Error::unsupported(format!(
            "{statement} on Lance table '{}' needs a session set up with \
             datafusion_lance::register_lance (it plans row-level statements so that \
             subqueries and constant WHERE clauses select exactly the right rows)",
            self.name
        ))
        .into()
    }

    /// The table's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Lance object-store parameters of the table.
    pub(crate) fn store_params(&self) -> &ObjectStoreParams {
        &self.params
    }

    /// The normalised table URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Which version this provider reads.
    pub fn version_spec(&self) -> &VersionSpec {
        &self.version
    }

    /// The Lance session cache used for a DataFusion session.
    pub fn session_cache(&self, state: &dyn Session) -> Arc<LanceSessionCache> {
        match &self.cache {
            Some(cache) => Arc::clone(cache),
            None => LanceSessionCache::for_config(state.config()),
        }
    }

    /// The dataset version a query planned with `state` reads: the pinned
    /// version, or the latest version resolved once per query.
    pub async fn snapshot(&self, state: &dyn Session) -> Result<Arc<Dataset>> {
        if let Some(pinned) = &self.pinned {
            return Ok(Arc::clone(pinned));
        }
        let started = state.execution_props().query_execution_start_time;
        if let Some(started) = started {
            let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(m) = memo.as_ref()
                && m.started == started
                && m.session_id == state.session_id()
            {
                return Ok(Arc::clone(&m.dataset));
            }
        }
        let dataset = self
            .session_cache(state)
            .open(&self.uri, &self.params, &VersionSpec::Latest)
            .await?;
        if let Some(started) = started {
            *self.memo.lock().unwrap_or_else(|e| e.into_inner()) = Some(SnapshotMemo {
                session_id: state.session_id().to_string(),
                started,
                dataset: Arc::clone(&dataset),
            });
        }
        Ok(dataset)
    }

    fn check_columns(&self, dataset: &Dataset, columns: &[String]) -> Result<()> {
        let current = Schema::from(dataset.schema());
        for name in columns {
            let registered = self.schema.field_with_name(name)?;
            match current.field_with_name(name) {
                Ok(field) if field.data_type().equals_datatype(registered.data_type()) => {}
                Ok(field) => {
                    return Err(Error::unsupported(format!(
                        "column '{name}' of Lance table '{}' is {} at version {} but was registered as {}; re-register the table",
                        self.display_uri,
                        field.data_type(),
                        dataset.version_id(),
                        registered.data_type()
                    )));
                }
                Err(_) => {
                    return Err(Error::unsupported(format!(
                        "column '{name}' no longer exists in Lance table '{}' at version {}; re-register the table",
                        self.display_uri,
                        dataset.version_id()
                    )));
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl TableProvider for LanceTableProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn constraints(&self) -> Option<&Constraints> {
        self.constraints.as_ref()
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| pushdown::classify(f, &self.schema))
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.plan_scan(state, projection, filters, limit).await
    }

    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self.plan_insert(state, input, insert_op).await?)
    }

    /// Never called for sessions set up by [`crate::register_lance`], which
    /// plan `DELETE` themselves: DataFusion 54 passes this hook no filter at
    /// all for some `WHERE` clauses, which would mean "delete every row".
    async fn delete_from(
        &self,
        _state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Err(self.dml_needs_registration("DELETE"))
    }

    /// See [`Self::delete_from`].
    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Err(self.dml_needs_registration("UPDATE"))
    }

    async fn truncate(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        Ok(self.plan_truncate(state).await?)
    }
}
