//! What a write statement writes to: shared by [`crate::physical_plan::LanceWriteExec`] and
//! [`crate::physical_plan::LanceCommitExec`].

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::internal_err;
use datafusion::common::runtime::JoinSet;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning, PlanProperties};
use lance::Dataset;
use lance_file::version::LanceFileVersion;
use lance_io::object_store::ObjectStoreParams;
use lance_table::format::Fragment;

use crate::config::{CommitBudget, LanceConfig, LanceTableOptions, VersionSpec};
use crate::error::Error;
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
        self.open_for(context.session_config())
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

/// Schema of the rows [`crate::physical_plan::LanceWriteExec`] emits: one row per partition.
pub(crate) fn fragments_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("rows", DataType::UInt64, false),
        Field::new("fragments", DataType::Utf8, false),
    ]))
}

/// Encodes the fragments one partition wrote.
pub(crate) fn encode_fragments(rows: u64, fragments: &[Fragment]) -> DFResult<RecordBatch> {
    let json =
        serde_json::to_string(fragments).map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(RecordBatch::try_new(
        fragments_schema(),
        vec![
            Arc::new(UInt64Array::from(vec![rows])),
            Arc::new(StringArray::from(vec![json])),
        ],
    )?)
}

/// Decodes rows emitted by [`crate::physical_plan::LanceWriteExec`].
pub(crate) fn decode_fragments(batch: &RecordBatch) -> DFResult<(u64, Vec<Fragment>)> {
    let bad = || DataFusionError::Internal("unexpected fragment metadata batch".into());
    let rows = batch
        .column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or_else(bad)?;
    let json = batch
        .column(1)
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(bad)?;
    let mut total = 0;
    let mut fragments = Vec::new();
    for i in 0..batch.num_rows() {
        total += rows.value(i);
        let decoded: Vec<Fragment> = serde_json::from_str(json.value(i))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        fragments.extend(decoded);
    }
    Ok((total, fragments))
}

/// The single-row `count` batch every DML statement returns.
pub(crate) fn count_batch(count: u64) -> DFResult<RecordBatch> {
    Ok(RecordBatch::try_new(
        count_schema(),
        vec![Arc::new(UInt64Array::from(vec![count]))],
    )?)
}

/// Schema of a DML result: one non-null `count` column.
pub(crate) fn count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
}

/// Converts a Lance error raised while writing `target`.
pub(crate) fn write_error(
    target: &WriteTarget,
    action: &'static str,
    e: lance::Error,
) -> DataFusionError {
    Error::lance(action, &target.location.uri, e).into()
}

/// Waits for every writer of a statement. Each yields its result `T` and the
/// fragments it wrote. A failing writer does not stop the others (writers
/// share no state); once all have ended, the fragments of the successful
/// ones are deleted and the first error returned — Lance removes a failing
/// writer's own files — so a failed statement leaves no file behind.
pub(crate) async fn join_writers<T: Send + 'static>(
    mut writers: JoinSet<DFResult<(T, Vec<Fragment>)>>,
    target: &OpenTarget,
) -> DFResult<(Vec<T>, Vec<Fragment>)> {
    let mut results = Vec::new();
    let mut fragments = Vec::new();
    let mut failure: Option<DataFusionError> = None;
    while let Some(joined) = writers.join_next().await {
        let result = joined.unwrap_or_else(|e| {
            Err(DataFusionError::Execution(format!(
                "a writer task failed: {e}"
            )))
        });
        match result {
            Ok((r, f)) => {
                results.push(r);
                fragments.extend(f);
            }
            Err(e) if failure.is_none() => failure = Some(e),
            Err(_) => {}
        }
    }
    match failure {
        Some(e) => {
            target.remove_files(&fragments).await;
            Err(e)
        }
        None => Ok((results, fragments)),
    }
}

/// Properties of a node that emits one row from one partition.
pub(crate) fn one_row_properties(schema: SchemaRef) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema),
        Partitioning::UnknownPartitioning(1),
        EmissionType::Final,
        Boundedness::Bounded,
    ))
}

/// Starts every partition of `input` for a node that has one partition.
pub(crate) fn execute_all(
    node: &str,
    input: &Arc<dyn ExecutionPlan>,
    partition: usize,
    context: &Arc<TaskContext>,
) -> DFResult<Vec<SendableRecordBatchStream>> {
    if partition != 0 {
        return internal_err!("{node} has one partition, {partition} requested");
    }
    (0..input.properties().partitioning.partition_count())
        .map(|p| input.execute(p, Arc::clone(context)))
        .collect()
}

/// [`execute_all`] for the rows a statement writes from: each stream ends in
/// an error once the statement is cancelled (see [`crate::cancel`]), so the
/// statement fails before it commits and removes what it wrote.
pub(crate) fn execute_sources(
    node: &str,
    input: &Arc<dyn ExecutionPlan>,
    partition: usize,
    context: &Arc<TaskContext>,
) -> DFResult<Vec<SendableRecordBatchStream>> {
    Ok(execute_all(node, input, partition, context)?
        .into_iter()
        .map(|stream| crate::cancel::cancellable(stream, context))
        .collect())
}

/// `plan` narrowed to the columns `projection` selects (table functions
/// whose report is computed whole).
pub(crate) fn project(
    plan: Arc<dyn ExecutionPlan>,
    projection: Option<&Vec<usize>>,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    let schema = plan.schema();
    let Some(columns) = projection else {
        return Ok(plan);
    };
    if columns.iter().copied().eq(0..schema.fields().len()) {
        return Ok(plan);
    }
    let exprs = columns
        .iter()
        .map(|&i| {
            let name = schema.field(i).name().clone();
            (
                Arc::new(Column::new(&name, i)) as Arc<dyn PhysicalExpr>,
                name,
            )
        })
        .collect::<Vec<_>>();
    Ok(Arc::new(ProjectionExec::try_new(exprs, plan)?))
}
