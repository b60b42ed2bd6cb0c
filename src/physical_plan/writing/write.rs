//! [`LanceWriteExec`]: each input partition writes Lance data files,
//! uncommitted, and emits their fragment metadata.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::internal_err;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::StreamExt;
use lance::dataset::transaction::Operation;
use lance::dataset::{InsertBuilder, WriteDestination, WriteMode, WriteParams};
use lance_file::writer::FileWriterOptions;

use crate::error::Error;
use crate::physical_plan::fragment_rows::{encode_fragments, fragments_schema};
use crate::physical_plan::target::{OpenTarget, WriteTarget};
use crate::physical_plan::writers::write_error;
use crate::progress::{FRAGMENTS_WRITTEN, ROWS_WRITTEN};

/// Writes every input partition as uncommitted Lance fragments (in parallel:
/// one writer per partition) and emits one row per partition with the
/// fragments' metadata. Nothing becomes visible until a
/// [`crate::physical_plan::LanceCommitExec`] commits those fragments.
pub struct LanceWriteExec {
    input: Arc<dyn ExecutionPlan>,
    target: Arc<WriteTarget>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceWriteExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceWriteExec")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl LanceWriteExec {
    /// Writes `input` to `target`.
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, target: Arc<WriteTarget>) -> Self {
        let partitions = input.output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(fragments_schema()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            target,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }
}

impl DisplayAs for LanceWriteExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.target.options;
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "LanceWriteExec: uri={}, read_version={}, max_rows_per_file={}",
                self.target.display_uri(),
                self.target.read_version(),
                o.max_rows_per_file
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "uri={}", self.target.display_uri())?;
                writeln!(f, "read_version={}", self.target.read_version())?;
                writeln!(f, "max_rows_per_file={}", o.max_rows_per_file)
            }
        }
    }
}

impl ExecutionPlan for LanceWriteExec {
    fn name(&self) -> &str {
        "LanceWriteExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![!self.target.ordered]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![self.target.ordered]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LanceWriteExec takes exactly one input");
        }
        Ok(Arc::new(Self::new(
            children.remove(0),
            Arc::clone(&self.target),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let target = self.target.open(&context);
        let input = self.input.execute(partition, Arc::clone(&context))?;
        let input = crate::cancel::cancellable(input, &context);
        let rows_written = MetricBuilder::new(&self.metrics).output_rows(partition);
        let counts = WriteCounts::new(&self.metrics, partition);
        let fut = async move {
            // Its files are kept from `lance_vacuum` in this process while it
            // writes (the commit node registers the statement again).
            let _writing = target.in_flight();
            // ... and in every process when the commit runs elsewhere.
            let mark = match &target.journal {
                Some(statement) => {
                    Some(crate::physical_plan::journal::begin(&target, statement).await?)
                }
                None => None,
            };
            let written = write_partition(input, target, &counts).await;
            let (rows, fragments) = match (written, mark) {
                // The marker stays (no longer refreshed) with the fragments
                // recorded: the commit removes it.
                (Ok(written), Some(mark)) => {
                    mark.record(&written.1).await;
                    written
                }
                (Ok(written), None) => written,
                // Lance removed this attempt's files: nothing to protect.
                (Err(e), Some(mark)) => {
                    mark.release().await;
                    return Err(e);
                }
                (Err(e), None) => return Err(e),
            };
            rows_written.add(rows as usize);
            encode_fragments(rows, &fragments)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            fragments_schema(),
            futures::stream::once(fut),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Checks one input batch against the table: NOT NULL columns hold no NULL.
fn check_batch(batch: &RecordBatch, target: &WriteTarget) -> DFResult<()> {
    for (field, column) in target.schema.fields().iter().zip(batch.columns()) {
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(Error::schema_mismatch(format!(
                "column '{}' of table '{}' is NOT NULL but the inserted data holds NULL",
                field.name(),
                target.table
            ))
            .into());
        }
    }
    Ok(())
}

/// Names the vector column(s) a failed fixed-size-list cast refers to.
fn explain_input_error(e: DataFusionError, target: &WriteTarget) -> DataFusionError {
    let text = e.to_string();
    if !text.contains("FixedSizeList") {
        return e;
    }
    let vectors: Vec<String> = target
        .schema
        .fields()
        .iter()
        .filter_map(|f| match f.data_type() {
            DataType::FixedSizeList(_, n) => Some(format!("'{}' (dimension {n})", f.name())),
            _ => None,
        })
        .collect();
    if vectors.is_empty() {
        return e;
    }
    Error::schema_mismatch(format!(
        "value does not fit vector column {} of table '{}': {}",
        vectors.join(" or "),
        target.table,
        e.strip_backtrace()
    ))
    .into()
}

/// What a writer has written so far (read live by a progress line, see
/// [`crate::progress`]).
#[derive(Clone)]
pub(crate) struct WriteCounts {
    rows: Count,
    fragments: Count,
}

impl WriteCounts {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        Self {
            rows: MetricBuilder::new(metrics).counter(ROWS_WRITTEN, partition),
            fragments: MetricBuilder::new(metrics).counter(FRAGMENTS_WRITTEN, partition),
        }
    }
}

/// Lance's buffer for each column of a file being written (its default).
const COLUMN_BUFFER: usize = 8 << 20;
/// The least buffer a column gets under a tight memory limit (smaller
/// buffers make smaller pages).
const MIN_COLUMN_BUFFER: usize = 64 << 10;

/// Reserves a writer's column buffers from the task's memory pool: Lance's
/// default (8 MiB per column) when the pool has room, less (halved down to
/// 64 KiB per column) under a tight limit, taking at most half of what the
/// limit leaves so that the statement's other writers get their share; the
/// writer is then told to buffer no more than what was reserved. Fails with
/// "resources exhausted" when even the least does not fit.
fn reserve_buffers(target: &OpenTarget) -> DFResult<Option<MemoryReservation>> {
    let Some(pool) = &target.memory_pool else {
        return Ok(None);
    };
    let columns = target.schema.fields().len().max(1);
    let share = match pool.memory_limit() {
        MemoryLimit::Finite(limit) => limit.saturating_sub(pool.reserved()) / 2,
        MemoryLimit::Infinite | MemoryLimit::Unknown => usize::MAX,
    };
    let reservation =
        MemoryConsumer::new(format!("Lance writer of '{}'", target.table)).register(pool);
    let mut per_column = COLUMN_BUFFER;
    while per_column > MIN_COLUMN_BUFFER && per_column * columns > share {
        per_column /= 2;
    }
    loop {
        match reservation.try_grow(per_column * columns) {
            Ok(()) => return Ok(Some(reservation)),
            Err(_) if per_column > MIN_COLUMN_BUFFER => per_column /= 2,
            Err(e) => {
                return Err(e.context(format!(
                    "writing to '{}': a writer buffers at least {} KiB per column ({columns} \
                     columns) and the memory limit leaves less",
                    target.table,
                    MIN_COLUMN_BUFFER >> 10
                )));
            }
        }
    }
}

/// Writes one partition; returns rows written and the uncommitted fragments.
pub(crate) async fn write_partition(
    mut input: SendableRecordBatchStream,
    target: Arc<OpenTarget>,
    counts: &WriteCounts,
) -> DFResult<(u64, Vec<lance_table::format::Fragment>)> {
    // An empty partition writes nothing (and does not touch the store).
    let first = match input.next().await {
        None => return Ok((0, Vec::new())),
        Some(batch) => batch.map_err(|e| explain_input_error(e, &target))?,
    };
    check_batch(&first, &target)?;
    counts.rows.add(first.num_rows());

    // The first error of the input, kept so the statement fails with it rather
    // than with Lance's wrapper.
    let input_error: Arc<Mutex<Option<DataFusionError>>> = Arc::new(Mutex::new(None));
    let rows = Arc::new(std::sync::atomic::AtomicU64::new(first.num_rows() as u64));
    let stream = {
        let (input_error, rows) = (Arc::clone(&input_error), Arc::clone(&rows));
        let written = counts.rows.clone();
        let target = Arc::clone(&target);
        futures::stream::once(async move { Ok(first) }).chain(input.map(move |batch| {
            let batch = batch
                .map_err(|e| explain_input_error(e, &target))
                .and_then(|b| check_batch(&b, &target).map(|_| b));
            match &batch {
                Ok(b) => {
                    rows.fetch_add(b.num_rows() as u64, std::sync::atomic::Ordering::Relaxed);
                    written.add(b.num_rows());
                }
                Err(e) => {
                    let mut slot = input_error.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.is_none() {
                        *slot = Some(DataFusionError::Execution(e.strip_backtrace()));
                    }
                }
            }
            batch
        }))
    };
    let stream: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(
        Arc::clone(&target.schema),
        stream,
    ));

    let buffers = reserve_buffers(&target)?;
    let base = target.base().await?;
    let params = WriteParams {
        mode: if base.is_some() {
            WriteMode::Append
        } else {
            WriteMode::Create
        },
        max_rows_per_file: target.options.max_rows_per_file,
        max_rows_per_group: target.options.max_rows_per_group,
        data_storage_version: Some(target.options.storage_version),
        enable_stable_row_ids: target.options.stable_row_ids,
        session: Some(Arc::clone(target.cache.session())),
        store_params: Some(target.params.clone()),
        skip_auto_cleanup: true,
        file_writer_options: buffers.as_ref().map(|r| FileWriterOptions {
            data_cache_bytes: Some(r.size() as u64),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dest = match &base {
        Some(ds) => WriteDestination::Dataset(Arc::clone(ds)),
        None => WriteDestination::Uri(&target.location.uri),
    };
    let written = InsertBuilder::new(dest)
        .with_params(&params)
        .execute_uncommitted_stream(stream)
        .await;
    let transaction = match written {
        Ok(t) => t,
        Err(e) => {
            let original = input_error.lock().unwrap_or_else(|p| p.into_inner()).take();
            return Err(original.unwrap_or_else(|| write_error(&target, "writing to", e)));
        }
    };
    let fragments = match transaction.operation {
        Operation::Append { fragments } | Operation::Overwrite { fragments, .. } => fragments,
        other => {
            return internal_err!("unexpected Lance write operation {other}");
        }
    };
    counts.fragments.add(fragments.len());
    Ok((rows.load(std::sync::atomic::Ordering::Relaxed), fragments))
}
