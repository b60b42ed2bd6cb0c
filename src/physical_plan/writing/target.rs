//! What a write statement writes to, as plan data ([`WriteTarget`]) and
//! opened in a task ([`OpenTarget`]), with how it commits and writes.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use lance::Dataset;
use lance_file::version::LanceFileVersion;
use lance_io::object_store::ObjectStoreParams;

use crate::config::{CommitBudget, LanceConfig, LanceTableOptions, VersionSpec};
use crate::location::{Snapshot, TableLocation};
use crate::physical_plan::write_metrics::WriteMetrics;
use crate::session::LanceSessionCache;

/// How the statement's fragments are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitKind {
    /// `INSERT INTO`: one `Append` transaction.
    Append,
    /// `INSERT OVERWRITE`: one `Overwrite` transaction keeping the schema.
    Overwrite,
    /// `TRUNCATE`: an `Overwrite` with no fragments; reports the rows removed.
    Truncate,
    /// `COPY ... TO ... STORED AS LANCE`: creates the dataset (version 1).
    Create,
}

impl fmt::Display for CommitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CommitKind::Append => "append",
            CommitKind::Overwrite => "overwrite",
            CommitKind::Truncate => "truncate",
            CommitKind::Create => "create",
        })
    }
}

/// Knobs of the data files written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    /// Rows per data file (fragment).
    pub max_rows_per_file: usize,
    /// Rows per row group.
    pub max_rows_per_group: usize,
    /// File format of a created table.
    pub storage_version: LanceFileVersion,
    /// Stable row ids for a created table.
    pub stable_row_ids: bool,
}

impl WriteOptions {
    /// The options a write gets from the session's `settings` and the
    /// table's `options` (table options win).
    pub(crate) fn resolve(settings: &LanceConfig, options: &LanceTableOptions) -> Self {
        Self {
            max_rows_per_file: options
                .max_rows_per_file
                .unwrap_or(settings.max_rows_per_file),
            max_rows_per_group: options
                .max_rows_per_group
                .unwrap_or(settings.max_rows_per_group),
            storage_version: options
                .data_storage_version
                .unwrap_or(settings.data_storage_version),
            stable_row_ids: options.enable_stable_row_ids.unwrap_or(false),
        }
    }
}

/// The table a write statement targets, as plan data: where it lives, the
/// version the statement read, its schema and the statement's write options.
/// No handle: a task opens what it needs through its process's Lance session
/// when it runs.
#[derive(Clone, PartialEq)]
pub struct WriteTarget {
    /// Table name (or location) for messages.
    pub(crate) table: String,
    pub(crate) location: TableLocation,
    /// The version the statement read; `None` when it creates the dataset.
    pub(crate) read: Option<Snapshot>,
    /// The table's Arrow schema (non-nullable fields are NOT NULL).
    pub(crate) schema: SchemaRef,
    pub(crate) options: WriteOptions,
    /// How long commits keep retrying when other writers commit first.
    pub(crate) commit_budget: CommitBudget,
    /// The statement's id when its writers run apart from its commit (on a
    /// cluster): writers mark themselves in flight under it in the table's
    /// directory, so `lance_vacuum` on any process keeps their files (see
    /// [`crate::physical_plan::journal`]).
    pub(crate) journal: Option<String>,
    /// The input's order is the table's: one writer writes it, in order
    /// (a permutation plan's rows).
    pub(crate) ordered: bool,
}

impl fmt::Debug for WriteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The location's Debug shows no storage option values.
        f.debug_struct("WriteTarget")
            .field("table", &self.table)
            .field("location", &self.location)
            .field("read_version", &self.read_version())
            .finish_non_exhaustive()
    }
}

impl WriteTarget {
    /// A target: `table` names it in messages; `read` is the version the
    /// statement read (`None` when it creates the table); options and the
    /// commit budget come from the session's `settings` and the table's
    /// `options`.
    pub(crate) fn new(
        table: impl Into<String>,
        location: TableLocation,
        read: Option<Snapshot>,
        schema: SchemaRef,
        settings: &LanceConfig,
        options: &LanceTableOptions,
    ) -> Self {
        Self {
            table: table.into(),
            location,
            read,
            schema,
            options: WriteOptions::resolve(settings, options),
            commit_budget: settings.commit_budget(),
            journal: None,
            ordered: false,
        }
    }

    /// This target, written in its input's order by one writer.
    pub(crate) fn in_order(self) -> Self {
        Self {
            ordered: true,
            ..self
        }
    }

    /// This target, its writers marking themselves in flight under
    /// `statement` in the table's directory.
    pub(crate) fn with_journal(&self, statement: impl Into<String>) -> Self {
        Self {
            journal: Some(statement.into()),
            ..self.clone()
        }
    }

    /// The version the statement read (0 when it creates the dataset).
    pub fn read_version(&self) -> u64 {
        self.read.as_ref().map_or(0, |s| s.version)
    }

    /// The table's location as shown in plans.
    pub fn display_uri(&self) -> &str {
        &self.location.display_uri
    }

    /// This target in a running task: the task's Lance session and the store
    /// parameters this process uses for the location.
    pub(crate) fn open(self: &Arc<Self>, context: &TaskContext) -> Arc<OpenTarget> {
        let mut open = Arc::unwrap_or_clone(self.open_for(context.session_config()));
        open.memory_pool = Some(Arc::clone(context.memory_pool()));
        Arc::new(open)
    }

    /// [`Self::open`] for a committing node, whose commit is recorded in
    /// `metrics` (its partition `partition`).
    pub(crate) fn open_metered(
        self: &Arc<Self>,
        context: &TaskContext,
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
    ) -> Arc<OpenTarget> {
        let mut open = Arc::unwrap_or_clone(self.open(context));
        open.metrics = WriteMetrics::new(metrics, partition);
        Arc::new(open)
    }

    /// This target in the session `config` belongs to (see [`Self::open`]).
    pub(crate) fn open_for(
        self: &Arc<Self>,
        config: &datafusion::prelude::SessionConfig,
    ) -> Arc<OpenTarget> {
        let cache = LanceSessionCache::for_config(config);
        let params = cache.params_for(&self.location);
        Arc::new(OpenTarget {
            target: Arc::clone(self),
            cache,
            params,
            metrics: WriteMetrics::unread(),
            memory_pool: None,
        })
    }
}

/// A [`WriteTarget`] in a running task (see [`WriteTarget::open`]).
#[derive(Clone)]
pub(crate) struct OpenTarget {
    target: Arc<WriteTarget>,
    pub(crate) cache: Arc<LanceSessionCache>,
    pub(crate) params: ObjectStoreParams,
    /// Where the commit is recorded (see [`WriteTarget::open_metered`]).
    pub(crate) metrics: WriteMetrics,
    /// The task's memory pool, which writers reserve their buffers from
    /// (`None` outside a task: Lance's default buffers, unreserved).
    pub(crate) memory_pool: Option<Arc<dyn datafusion::execution::memory_pool::MemoryPool>>,
}

impl std::ops::Deref for OpenTarget {
    type Target = WriteTarget;

    fn deref(&self) -> &WriteTarget {
        &self.target
    }
}

impl OpenTarget {
    /// The version the statement read (`None` when it creates the dataset).
    pub(crate) async fn base(&self) -> crate::error::Result<Option<Arc<Dataset>>> {
        match &self.read {
            Some(snapshot) => Ok(Some(
                self.cache
                    .open_snapshot(&self.location.uri, &self.params, snapshot)
                    .await?,
            )),
            None => Ok(None),
        }
    }

    /// The table's latest version.
    pub(crate) async fn latest(&self) -> crate::error::Result<Arc<Dataset>> {
        self.cache
            .open(&self.location.uri, &self.params, &VersionSpec::Latest)
            .await
    }

    /// Serves a version this statement committed to the next query.
    pub(crate) fn note_committed(&self, dataset: Arc<Dataset>) {
        self.cache
            .note_committed(&self.location.uri, &self.params, dataset);
    }
}
