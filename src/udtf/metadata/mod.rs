//! Metadata table functions: one row per version, fragment, tag or index of a
//! Lance table, read when the query is planned (diagnostics, not hot paths).
//!
//! | function | rows |
//! |---|---|
//! | `lance_versions('<table or location>')` | [`versions`] |
//! | `lance_fragments('<table or location>')` | [`fragments`] |
//! | `lance_tags('<table or location>')` | [`tags`] |
//! | `lance_indices('<table or location>')` | [`indices`] |
//!
//! On a `db://` table, `lance_versions` and `lance_tags` ask its service.

mod cloud;
pub(crate) mod fragments;
pub(crate) mod indices;
pub(crate) mod tags;
pub(crate) mod versions;

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::TableReference;
use datafusion::datasource::TableProvider;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;
use lance::Dataset;

use crate::config::VersionSpec;
use crate::error::fail;
use crate::location::{TableLocation, redact_uri};
use crate::session::LanceSessionCache;
use crate::table::cloud::CloudTableProvider;
use crate::table::lookup::{Target, registered_target};
use crate::table::statement::{NamedTable, Pinner, Statement, StatementTable};

/// SQL name of the version-history function.
pub const VERSIONS_FUNCTION_NAME: &str = "lance_versions";
/// SQL name of the fragment-list function.
pub const FRAGMENTS_FUNCTION_NAME: &str = "lance_fragments";
/// SQL name of the tag-list function.
pub const TAGS_FUNCTION_NAME: &str = "lance_tags";
/// SQL name of the index-list function.
pub const INDICES_FUNCTION_NAME: &str = "lance_indices";

/// Which metadata a [`MetadataFunction`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataKind {
    /// `lance_versions`: one row per version.
    Versions,
    /// `lance_fragments`: one row per fragment of the latest version.
    Fragments,
    /// `lance_tags`: one row per tag.
    Tags,
    /// `lance_indices`: one row per index of the latest version.
    Indices,
}

impl MetadataKind {
    /// Every kind.
    pub const ALL: [MetadataKind; 4] = [Self::Versions, Self::Fragments, Self::Tags, Self::Indices];

    /// The function's SQL name.
    pub fn function_name(self) -> &'static str {
        match self {
            Self::Versions => VERSIONS_FUNCTION_NAME,
            Self::Fragments => FRAGMENTS_FUNCTION_NAME,
            Self::Tags => TAGS_FUNCTION_NAME,
            Self::Indices => INDICES_FUNCTION_NAME,
        }
    }

    fn schema(self) -> SchemaRef {
        match self {
            Self::Versions => versions::schema(),
            Self::Fragments => fragments::schema(),
            Self::Tags => tags::schema(),
            Self::Indices => indices::schema(),
        }
    }

    async fn batch(self, dataset: &Dataset, location: &TableLocation) -> DFResult<RecordBatch> {
        match self {
            Self::Versions => versions::batch(dataset, location).await,
            Self::Fragments => fragments::batch(dataset, location).await,
            Self::Tags => tags::batch(dataset, location).await,
            Self::Indices => indices::batch(dataset, location).await,
        }
    }
}

/// `lance_versions`, `lance_fragments`, `lance_tags` or `lance_indices` (one string argument:
/// a table name or a dataset location).
#[derive(Debug)]
pub struct MetadataFunction {
    kind: MetadataKind,
}

impl MetadataFunction {
    /// The function listing `kind`.
    pub fn new(kind: MetadataKind) -> Self {
        Self { kind }
    }
}

impl TableFunctionImpl for MetadataFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let target = match args.exprs() {
            [arg] => super::string(arg),
            _ => None,
        };
        let Some(target) = target.map(str::to_string) else {
            return fail!(
                invalid_input,
                "{}() takes one string: a table name or a dataset location",
                self.kind.function_name()
            );
        };
        Ok(StatementTable::provider(Metadata {
            kind: self.kind,
            target,
            location: None,
        }))
    }
}

/// A metadata function call as a statement (read when the query is planned).
pub(crate) struct Metadata {
    pub(crate) kind: MetadataKind,
    /// The table or location as the query names it.
    pub(crate) target: String,
    /// Where it lives, once resolved (see [`crate::resolve_lance_tables`]).
    pub(crate) location: Option<TableLocation>,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The target may be a location with credentials in it.
        f.debug_struct("Metadata")
            .field("kind", &self.kind)
            .field("target", &redact_uri(&self.target))
            .field("location", &self.location)
            .finish()
    }
}

impl NamedTable for Metadata {
    fn target(&self) -> &str {
        &self.target
    }

    fn location(&self) -> Option<&TableLocation> {
        self.location.as_ref()
    }

    fn with_location(&self, location: TableLocation) -> Self {
        Self {
            kind: self.kind,
            target: self.target.clone(),
            location: Some(location),
        }
    }
}

#[async_trait]
impl Statement for Metadata {
    fn schema(&self) -> SchemaRef {
        self.kind.schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        if let Some(table) = self.cloud_table(state).await? {
            let batch = cloud::batch(self.kind, &table).await?;
            return Ok(MemorySourceConfig::try_new_exec(
                &[vec![batch]],
                self.kind.schema(),
                None,
            )?);
        }
        let location = self.table_location(state).await?;
        let cache = LanceSessionCache::for_config(state.config());
        let dataset = cache
            .open(
                &location.uri,
                &cache.params_for(&location),
                &VersionSpec::Latest,
            )
            .await?;
        let batch = self.kind.batch(&dataset, &location).await?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.kind.schema(),
            None,
        )?)
    }

    async fn pin(
        &self,
        _pinner: &mut dyn Pinner,
        state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if self.cloud_table(state).await?.is_some() {
            return Ok(None);
        }
        self.resolved(state).await
    }
}

impl Metadata {
    /// The `db://` table the call names, if it names one.
    async fn cloud_table(&self, state: &dyn Session) -> DFResult<Option<Arc<CloudTableProvider>>> {
        if self.location.is_some() {
            return Ok(None);
        }
        let reference = TableReference::from(self.target.as_str());
        Ok(match registered_target(state, &reference).await? {
            Some(Target::Cloud(table)) => Some(table),
            _ => None,
        })
    }
}
