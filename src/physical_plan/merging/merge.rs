//! [`LanceMergeExec`]: a key-partitioned upsert committed as one version.

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::internal_err;
use datafusion::common::runtime::JoinSet;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{Distribution, PhysicalExpr};
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;
use lance::Dataset;
use lance::dataset::WhenNotMatchedBySource as LanceBySource;
use lance::dataset::{MergeInsertBuilder, MergeInsertJob};
use lance::dataset::{WhenMatched as LanceMatched, WhenNotMatched as LanceNotMatched};
use std::collections::HashMap;

use crate::physical_plan::inputs::execute_sources;
use crate::physical_plan::journal::{self, Start};
use crate::physical_plan::merge_options::{
    MergeCondition, MergeOptions, MergeOutput, WhenMatched, WhenNotMatched, WhenNotMatchedBySource,
    stats_schema,
};
use crate::physical_plan::merging::SourceKeys;
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::target::{OpenTarget, WriteTarget};
use crate::physical_plan::transaction::{Commit, commit_error};
use crate::physical_plan::writers::write_error;

/// Merges in this process are serialised per table, so that two merges
/// inserting the same new key cannot both insert it even when the table has
/// no primary key (Lance detects that conflict only for primary-key merges).
static MERGE_LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Default::default);

fn merge_lock(uri: &str) -> Arc<tokio::sync::Mutex<()>> {
    let mut locks = MERGE_LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    Arc::clone(locks.entry(uri.to_string()).or_default())
}

/// Upserts its input into a Lance table with Lance's merge-insert.
///
/// The input is hash-partitioned on the key (the node requires it, so
/// DataFusion inserts the repartitioning when the source has several
/// partitions): every key value lives in one partition, which checks that
/// no key occurs twice. The whole source is read
/// and checked before Lance starts: an ambiguous key or any source error fails
/// the statement with nothing written. Then ONE merge-insert job runs against
/// the table's latest version: one statement, one version. Merges of a table
/// are serialised within the process.
pub struct LanceMergeExec {
    input: Arc<dyn ExecutionPlan>,
    target: Arc<WriteTarget>,
    keys: Vec<String>,
    options: MergeOptions,
    output: MergeOutput,
    /// The source reads the target table (at the statement's version).
    reads_target: bool,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceMergeExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceMergeExec")
            .field("target", &self.target)
            .field("keys", &self.keys)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LanceMergeExec {
    /// Merges `input` (hash-partitioned on `keys`) into `target`.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        target: Arc<WriteTarget>,
        keys: Vec<String>,
        options: MergeOptions,
        output: MergeOutput,
    ) -> Self {
        let schema = match output {
            MergeOutput::Stats => stats_schema(),
            MergeOutput::Count => count_schema(),
        };
        let properties = one_row_properties(schema);
        let reads_target = reads_table(&input, target.display_uri());
        Self {
            input,
            target,
            keys,
            options,
            output,
            reads_target,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn output_schema(&self) -> SchemaRef {
        Arc::clone(self.properties.eq_properties.schema())
    }

    /// The same statement on `target` (the same table, marked as one
    /// statement on a cluster).
    pub(crate) fn with_target(&self, target: Arc<WriteTarget>) -> Self {
        Self {
            input: Arc::clone(&self.input),
            target,
            keys: self.keys.clone(),
            options: self.options.clone(),
            output: self.output,
            reads_target: self.reads_target,
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }

    /// The merge key columns.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// What happens to matched and unmatched rows.
    pub fn options(&self) -> &MergeOptions {
        &self.options
    }

    /// What the statement returns.
    pub fn output(&self) -> MergeOutput {
        self.output
    }
}

impl DisplayAs for LanceMergeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        write!(
            f,
            "LanceMergeExec: uri={}, on=[{}], when_matched={}, when_not_matched={:?}, \
             when_not_matched_by_source={}",
            self.target.display_uri(),
            self.keys.join(", "),
            o.when_matched,
            o.when_not_matched,
            o.when_not_matched_by_source
        )
    }
}

impl ExecutionPlan for LanceMergeExec {
    fn name(&self) -> &str {
        "LanceMergeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        let schema = self.input.schema();
        let keys = self
            .keys
            .iter()
            .filter_map(|k| {
                let index = schema.index_of(k).ok()?;
                Some(Arc::new(Column::new(k, index)) as Arc<dyn PhysicalExpr>)
            })
            .collect();
        vec![Distribution::HashPartitioned(keys)]
    }

    /// No: a source of one partition is already partitioned on the key (one
    /// partition holds every key), and splitting it would copy the whole
    /// source to check it on more cores (the check costs less than the copy).
    /// A source of several partitions is hash-partitioned on the key.
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LanceMergeExec takes exactly one input");
        }
        Ok(Arc::new(Self::new(
            children.remove(0),
            Arc::clone(&self.target),
            self.keys.clone(),
            self.options.clone(),
            self.output,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let inputs = execute_sources("LanceMergeExec", &self.input, partition, &context)?;
        let source_schema = self.input.schema();
        let key_indices = self
            .keys
            .iter()
            .map(|k| source_schema.index_of(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (target, keys, options, output, reads_target) = (
            self.target.open_metered(&context, &self.metrics, partition),
            self.keys.clone(),
            self.options.clone(),
            self.output,
            self.reads_target,
        );
        let schema = self.output_schema();
        let fut = async move {
            let _writing = target.in_flight();
            let (inserted, updated, deleted, version) = match journal::start(&target).await? {
                Start::Committed { version, result } => {
                    let n = |i: usize| result.get(i).copied().unwrap_or(0);
                    (n(0), n(1), n(2), version)
                }
                Start::Run(mark) => {
                    let merged = async {
                        let (source, held) = checked_source(
                            inputs,
                            &source_schema,
                            key_indices,
                            &target,
                            &context,
                            reads_target,
                        )
                        .await?;
                        // Lance joins the source with the table in a plan of
                        // its own, outside this pool, holding about the
                        // source's size again: reserved as that estimate
                        // before Lance starts, so a memory limit counts it.
                        let join = MemoryConsumer::new(LANCE_JOIN).register(context.memory_pool());
                        join.try_grow(held.size())?;
                        run_merge(&target, keys, &options, source, reads_target).await
                    };
                    let (inserted, updated, deleted, version) =
                        journal::marked(mark, merged).await?;
                    let metrics = &target.metrics;
                    metrics.rows_inserted.add(inserted as usize);
                    metrics.rows_updated.add(updated as usize);
                    metrics.rows_deleted.add(deleted as usize);
                    (inserted, updated, deleted, version)
                }
            };
            match output {
                MergeOutput::Count => count_batch(inserted + updated),
                MergeOutput::Stats => Ok(RecordBatch::try_new(
                    stats_schema(),
                    [inserted, updated, deleted, version]
                        .into_iter()
                        .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
                        .collect(),
                )?),
            }
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(fut),
        )))
    }
}

/// The memory consumer standing for Lance's merge join (an estimate: the
/// source's size).
const LANCE_JOIN: &str = "LanceMergeExec Lance's merge join (estimated at the source's size)";

/// True when `plan` scans the table shown as `display_uri`.
fn reads_table(plan: &Arc<dyn ExecutionPlan>, display_uri: &str) -> bool {
    plan.downcast_ref::<crate::physical_plan::LanceScanExec>()
        .is_some_and(|scan| scan.display_uri() == display_uri)
        || plan
            .children()
            .into_iter()
            .any(|child| reads_table(child, display_uri))
}

/// Runs the merge-insert job under the table's merge lock.
///
/// A source computed from the table itself was read at the statement's
/// version: the merge runs against that version, and a conflicting commit by
/// another writer fails the statement (merging those rows into a newer
/// version could undo that writer's change). Any other source merges into
/// the latest version, read inside the lock (a merge that waited sees what
/// the previous one committed), and is merged again when another writer's
/// commit conflicts.
async fn run_merge(
    target: &OpenTarget,
    keys: Vec<String>,
    options: &MergeOptions,
    source: Vec<RecordBatch>,
    reads_target: bool,
) -> DFResult<(u64, u64, u64, u64)> {
    let lock = merge_lock(&target.location.uri);
    let _guard = lock.lock().await;
    let started = Instant::now();
    let mut dataset = match (target.base().await?, reads_target) {
        (Some(base), true) => base,
        _ => target.latest().await?,
    };
    let mut attempt = 1;
    loop {
        let job = merge_job(target, &dataset, &keys, options)?;
        let uncommitted = match job.execute_uncommitted_batches(source.clone()).await {
            Ok(uncommitted) => uncommitted,
            Err(e) => return Err(merge_error(target, e, started).await),
        };
        let mut commit = Commit::of(Some(Arc::clone(&dataset)), uncommitted.transaction);
        if let Some(rows) = uncommitted.affected_rows {
            commit = commit.with_affected_rows(rows);
        }
        let stats = uncommitted.stats;
        commit = commit.with_result(vec![
            stats.num_inserted_rows,
            stats.num_updated_rows,
            stats.num_deleted_rows,
        ]);
        // A failed attempt's files are removed by the commit path (a retry
        // writes its own).
        match target.try_commit(commit).await {
            Ok(committed) => {
                return Ok((
                    stats.num_inserted_rows,
                    stats.num_updated_rows,
                    stats.num_deleted_rows,
                    committed.version_id(),
                ));
            }
            Err(e) => {
                let retry = matches!(e, lance::Error::RetryableCommitConflict { .. })
                    && attempt < MERGE_ATTEMPTS
                    && !reads_target;
                if !retry {
                    return Err(merge_error(target, e, started).await);
                }
                // Another writer committed first: merge again on its version.
                attempt += 1;
                dataset = target.latest().await?;
            }
        }
    }
}

/// How often a merge runs again after a conflicting commit by another writer.
const MERGE_ATTEMPTS: u32 = 10;

async fn merge_error(target: &OpenTarget, e: lance::Error, started: Instant) -> DataFusionError {
    match e {
        e @ (lance::Error::CommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::RetryableCommitConflict { .. }
        | lance::Error::TooMuchWriteContention { .. }) => commit_error(target, e, started).await,
        e => write_error(target, "merging into", e),
    }
}

/// Lance's merge-insert job for `options` on `dataset`.
fn merge_job(
    target: &WriteTarget,
    dataset: &Arc<Dataset>,
    keys: &[String],
    options: &MergeOptions,
) -> DFResult<MergeInsertJob> {
    let err = |e| write_error(target, "merging into", e);
    let mut builder =
        MergeInsertBuilder::try_new(Arc::clone(dataset), keys.to_vec()).map_err(err)?;
    builder
        .when_matched(match &options.when_matched {
            WhenMatched::UpdateAll => LanceMatched::UpdateAll,
            WhenMatched::UpdateIf(condition) => {
                LanceMatched::UpdateIfExpr(lance_condition(condition)?)
            }
            WhenMatched::DoNothing => LanceMatched::DoNothing,
            WhenMatched::Delete => LanceMatched::Delete,
            WhenMatched::Fail => LanceMatched::Fail,
        })
        .when_not_matched(match options.when_not_matched {
            WhenNotMatched::InsertAll => LanceNotMatched::InsertAll,
            WhenNotMatched::DoNothing => LanceNotMatched::DoNothing,
        })
        .when_not_matched_by_source(match &options.when_not_matched_by_source {
            WhenNotMatchedBySource::Keep => LanceBySource::Keep,
            WhenNotMatchedBySource::Delete => LanceBySource::Delete,
            WhenNotMatchedBySource::DeleteIf(condition) => {
                LanceBySource::DeleteIf(lance_condition(condition)?)
            }
        });
    builder.try_build().map_err(err)
}

/// A planned merge condition as Lance's merge-insert takes it: columns
/// qualified `source.` / `target.`, the relations of its join.
fn lance_condition(condition: &MergeCondition) -> DFResult<Expr> {
    match condition {
        MergeCondition::Expr(expr) => Ok(expr.clone()),
        MergeCondition::Sql(_) => internal_err!("merge condition {condition} was not planned"),
    }
}

/// Reads the key-partitioned inputs concurrently, checking that no key occurs
/// twice (each partition owns its keys, so a per-partition check is exact).
/// Returns every batch, or the first error: nothing reaches Lance before the
/// whole source has been read and checked. The batches and the key hashes
/// are reserved from the statement's memory pool, so a memory limit bounds
/// them (the query fails with "resources exhausted" rather than the process
/// running out of memory).
async fn checked_source(
    inputs: Vec<SendableRecordBatchStream>,
    schema: &SchemaRef,
    key_indices: Vec<usize>,
    target: &Arc<OpenTarget>,
    context: &Arc<TaskContext>,
    reads_target: bool,
) -> DFResult<(Vec<RecordBatch>, MemoryReservation)> {
    let mut readers = JoinSet::new();
    for (i, mut input) in inputs.into_iter().enumerate() {
        let (keys, target, schema) = (key_indices.clone(), Arc::clone(target), Arc::clone(schema));
        let reservation = MemoryConsumer::new(format!("LanceMergeExec source[{i}]"))
            .register(context.memory_pool());
        readers.spawn(async move {
            let table = (target.table.as_str(), target.schema.as_ref());
            let mut seen = SourceKeys::new(&schema, keys, table, reads_target);
            let mut batches = Vec::new();
            let mut held = 0;
            while let Some(batch) = input.next().await {
                let batch = batch?;
                if batch.num_rows() == 0 {
                    continue;
                }
                seen.add(&batch)?;
                held += batch.get_array_memory_size();
                reservation.try_resize(held + seen.size())?;
                batches.push(batch);
            }
            seen.check(&batches)?;
            reservation.try_resize(held)?;
            Ok::<_, DataFusionError>((batches, reservation))
        });
    }
    let mut batches = Vec::new();
    let reservation = MemoryConsumer::new("LanceMergeExec source").register(context.memory_pool());
    while let Some(joined) = readers.join_next().await {
        let (part, held) = joined
            .map_err(|e| DataFusionError::Execution(format!("a source task failed: {e}")))??;
        batches.extend(part);
        reservation.grow(held.size());
    }
    if batches.is_empty() {
        batches.push(RecordBatch::new_empty(Arc::clone(schema)));
    }
    Ok((batches, reservation))
}
