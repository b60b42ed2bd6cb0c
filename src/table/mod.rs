//! [`LanceTableProvider`]: a Lance dataset as a DataFusion table.

pub(crate) mod cloud;
pub(crate) mod cloud_ddl;
pub(crate) mod cloud_dml;
pub(crate) mod cloud_merge;
pub(crate) mod create;
pub(crate) mod dml;
pub(crate) mod factory;
pub(crate) mod index_prune;
pub(crate) mod index_rules;
pub(crate) mod lookup;
pub(crate) mod maintain;
pub(crate) mod merge;
pub(crate) mod partition;
pub(crate) mod permutation;
pub(crate) mod pushdown;
pub(crate) mod scan;
pub(crate) mod statement;
pub(crate) mod write;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
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
use crate::location::{Snapshot, TableLocation, normalize_uri};
use crate::session::{LanceSessionCache, store_params};

pub use factory::LanceTableProviderFactory;

/// Name of the row-address column of DML scans and `lance_rows`.
pub(crate) const ROW_ADDR: &str = "_rowaddr";

/// Name of the row-id column of `lance_rows`.
pub(crate) const ROW_ID: &str = "_rowid";

/// A Lance dataset as a DataFusion table.
///
/// # Freshness
///
/// A provider registered at the *latest* version reads the newest version as
/// of the start of each statement's physical planning: the session's query
/// planner (installed by [`crate::register_lance`]) resolves every Lance table
/// a statement references once, before any scan is planned, so every
/// partition and every reference to the table in that statement — self-joins,
/// subqueries, the target of a DML statement — reads exactly that version,
/// even if a writer commits meanwhile. The next statement sees the new
/// version. Thanks to the shared Lance session, resolving costs one listing
/// of the version directory and no manifest read when nothing changed.
///
/// A provider registered at a fixed version or tag always reads that version.
///
/// The schema is the one the table had when the provider was created;
/// re-register the table to see columns added later.
pub struct LanceTableProvider {
    name: String,
    location: TableLocation,
    params: ObjectStoreParams,
    version: VersionSpec,
    schema: SchemaRef,
    constraints: Option<Constraints>,
    options: LanceTableOptions,
    /// The version a pinned provider reads.
    pinned: Option<Fixed>,
    /// The version one statement reads (set by the query planner; see
    /// [`crate::planner::LanceQueryPlanner`]). Writes are still allowed.
    resolved: Option<Fixed>,
    /// Expose Lance's row address as a trailing `_rowaddr` column (DML and
    /// `lance_rows`).
    row_addr: bool,
    /// Expose Lance's row id as a `_rowid` column before `_rowaddr`
    /// (`lance_rows`).
    row_id: bool,
    /// Column defaults stored by `ALTER TABLE ... DEFAULT` (what an `INSERT`
    /// omitting the column writes).
    defaults: Arc<HashMap<String, Expr>>,
}

/// The `DEFAULT`s stored in `schema`'s field metadata.
fn column_defaults(schema: &Schema) -> Arc<HashMap<String, Expr>> {
    use crate::physical_plan::alter::{DEFAULT_METADATA_KEY, default_value};
    Arc::new(
        schema
            .fields()
            .iter()
            .filter_map(|f| {
                let text = f.metadata().get(DEFAULT_METADATA_KEY)?;
                let value = default_value(text, f.data_type())?;
                Some((f.name().clone(), Expr::Literal(value, None)))
            })
            .collect(),
    )
}

impl fmt::Debug for LanceTableProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceTableProvider")
            .field("uri", &self.location.display_uri)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// A version a provider is fixed to: the snapshot (what a plan carries) and,
/// in the process that fixed it, the open dataset.
#[derive(Clone)]
pub(crate) struct Fixed {
    snapshot: Snapshot,
    dataset: Option<Arc<Dataset>>,
}

impl Fixed {
    fn open(dataset: Arc<Dataset>) -> Self {
        Self {
            snapshot: Snapshot::of(&dataset),
            dataset: Some(dataset),
        }
    }
}

/// A [`LanceTableProvider`] as plain data (what a codec carries): no
/// dataset handle, no manifest, no store parameters beyond the location's
/// storage options.
#[derive(Debug, Clone)]
pub(crate) struct ProviderParts {
    pub(crate) name: String,
    pub(crate) location: TableLocation,
    pub(crate) options: LanceTableOptions,
    pub(crate) pinned: Option<Snapshot>,
    pub(crate) resolved: Option<Snapshot>,
    pub(crate) schema: SchemaRef,
    pub(crate) constraints: Option<Constraints>,
    pub(crate) row_addr: bool,
    pub(crate) row_id: bool,
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

    /// Opens the dataset through `cache` when building, instead of the
    /// process-wide shared Lance session. Queries open what they read
    /// through the Lance session of the context that runs them (see
    /// [`crate::LanceSessionContextExt::with_lance_session_cache`]).
    pub fn with_session_cache(mut self, cache: Arc<LanceSessionCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Opens the dataset and builds the provider.
    pub async fn build(self) -> Result<LanceTableProvider> {
        let open_with = self.cache.clone().unwrap_or_else(LanceSessionCache::shared);
        self.build_with(&open_with).await
    }

    /// Builds, opening through `open_with`.
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
        let pinned = (!self.options.version.is_latest()).then(|| Fixed::open(dataset));
        let location = TableLocation::new(uri, self.options.storage_options.clone());
        Ok(LanceTableProvider {
            name: self.name.unwrap_or_else(|| location.display_uri.clone()),
            location,
            params,
            version: self.options.version.clone(),
            defaults: column_defaults(&schema),
            schema,
            constraints,
            options: self.options,
            pinned,
            resolved: None,
            row_addr: false,
            row_id: false,
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

    /// The same table reading `dataset` (the version one statement reads).
    pub(crate) fn at_snapshot(&self, dataset: Arc<Dataset>) -> Self {
        Self {
            resolved: Some(Fixed::open(dataset)),
            ..self.clone_config()
        }
    }

    /// The same table pinned to `version`, with the schema it had then
    /// (opened through the Lance session of `state`).
    pub(crate) async fn at_version(
        &self,
        version: VersionSpec,
        state: &dyn Session,
    ) -> Result<Self> {
        LanceTableProvider::builder(self.location.uri.clone())
            .with_name(self.name.clone())
            .with_table_options(LanceTableOptions {
                version,
                ..self.options.clone()
            })
            .with_store_params(self.params.clone())
            .build_with(&self.session_cache(state))
            .await
    }

    /// The version this table is pinned to, if it is pinned.
    pub(crate) fn pinned_version(&self) -> Option<u64> {
        self.pinned.as_ref().map(|fixed| fixed.snapshot.version)
    }

    /// True when the provider adds Lance's `_rowid` / `_rowaddr` columns.
    pub(crate) fn has_row_columns(&self) -> bool {
        self.row_addr || self.row_id
    }

    /// True when the version this provider reads is decided per statement
    /// and not decided yet.
    pub(crate) fn needs_snapshot(&self) -> bool {
        self.pinned.is_none() && self.resolved.is_none()
    }

    fn clone_config(&self) -> Self {
        Self {
            name: self.name.clone(),
            location: self.location.clone(),
            params: self.params.clone(),
            version: self.version.clone(),
            schema: Arc::clone(&self.schema),
            constraints: self.constraints.clone(),
            options: self.options.clone(),
            pinned: self.pinned.clone(),
            resolved: self.resolved.clone(),
            row_addr: self.row_addr,
            row_id: self.row_id,
            defaults: Arc::clone(&self.defaults),
        }
    }

    /// The same table with Lance's row address as a trailing `_rowaddr`
    /// column (reading the same snapshot).
    pub(crate) fn with_row_addresses(&self) -> Self {
        let mut fields: Vec<_> = self.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(ROW_ADDR, DataType::UInt64, false)));
        Self {
            schema: Arc::new(Schema::new(fields)),
            constraints: None,
            row_addr: true,
            ..self.clone_config()
        }
    }

    /// The same table with Lance's row id and row address as trailing
    /// `_rowid` and `_rowaddr` columns (`lance_rows`).
    pub(crate) fn with_row_identity(&self) -> Self {
        let mut fields: Vec<_> = self.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(ROW_ID, DataType::UInt64, false)));
        fields.push(Arc::new(Field::new(ROW_ADDR, DataType::UInt64, false)));
        Self {
            schema: Arc::new(Schema::new(fields)),
            constraints: None,
            row_addr: true,
            row_id: true,
            ..self.clone_config()
        }
    }

    fn dml_needs_registration(&self, statement: &str) -> datafusion::error::DataFusionError {
        Error::not_supported(format!(
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
        &self.location.uri
    }

    /// Where the table lives, as plan nodes carry it.
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// Which version this provider reads.
    pub fn version_spec(&self) -> &VersionSpec {
        &self.version
    }

    /// The Lance session cache used for a DataFusion session.
    pub fn session_cache(&self, state: &dyn Session) -> Arc<LanceSessionCache> {
        LanceSessionCache::for_config(state.config())
    }

    /// This provider as plain data.
    pub(crate) fn parts(&self) -> ProviderParts {
        ProviderParts {
            name: self.name.clone(),
            location: self.location.clone(),
            options: self.options.clone(),
            pinned: self.pinned.as_ref().map(|f| f.snapshot.clone()),
            resolved: self.resolved.as_ref().map(|f| f.snapshot.clone()),
            schema: Arc::clone(&self.schema),
            constraints: self.constraints.clone(),
            row_addr: self.row_addr,
            row_id: self.row_id,
        }
    }

    /// The provider `parts` describe, opening through `params` (no I/O:
    /// versions are opened when a statement is planned).
    pub(crate) fn from_parts(parts: ProviderParts, params: ObjectStoreParams) -> Self {
        let fixed = |snapshot| Fixed {
            snapshot,
            dataset: None,
        };
        Self {
            name: parts.name,
            version: parts.options.version.clone(),
            location: parts.location,
            params,
            defaults: column_defaults(&parts.schema),
            schema: parts.schema,
            constraints: parts.constraints,
            options: parts.options,
            pinned: parts.pinned.map(fixed),
            resolved: parts.resolved.map(fixed),
            row_addr: parts.row_addr,
            row_id: parts.row_id,
        }
    }

    /// The dataset version a statement planned with `state` reads: the pinned
    /// version, the version resolved for the statement, or (for plans not made
    /// by a session set up with [`crate::register_lance`]) the latest version.
    pub async fn snapshot(&self, state: &dyn Session) -> Result<Arc<Dataset>> {
        let cache = self.session_cache(state);
        match self.pinned.as_ref().or(self.resolved.as_ref()) {
            Some(Fixed {
                dataset: Some(dataset),
                ..
            }) => Ok(Arc::clone(dataset)),
            Some(Fixed { snapshot, .. }) => {
                cache
                    .open_snapshot(&self.location.uri, &self.params, snapshot)
                    .await
            }
            None => {
                cache
                    .open(&self.location.uri, &self.params, &VersionSpec::Latest)
                    .await
            }
        }
    }

    fn check_columns(&self, dataset: &Dataset, columns: &[String]) -> Result<()> {
        let current = Schema::from(dataset.schema());
        for name in columns {
            let registered = self.schema.field_with_name(name)?;
            match current.field_with_name(name) {
                Ok(field) if field.data_type().equals_datatype(registered.data_type()) => {}
                Ok(field) => {
                    return Err(Error::schema_mismatch(format!(
                        "column '{name}' of Lance table '{}' is {} at version {} but was registered as {}; re-register the table",
                        self.location.display_uri,
                        field.data_type(),
                        dataset.version_id(),
                        registered.data_type()
                    )));
                }
                Err(_) => {
                    return Err(Error::schema_mismatch(format!(
                        "column '{name}' no longer exists in Lance table '{}' at version {}; re-register the table",
                        self.location.display_uri,
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

    fn get_column_default(&self, column: &str) -> Option<&Expr> {
        self.defaults.get(column)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        // Filters on the row id / address columns stay with DataFusion.
        let meta = |f: &Expr| {
            f.column_refs()
                .iter()
                .any(|c| (self.row_id && c.name == ROW_ID) || (self.row_addr && c.name == ROW_ADDR))
        };
        Ok(filters
            .iter()
            .map(|f| {
                if meta(f) {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    pushdown::classify(f, &self.schema)
                }
            })
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
