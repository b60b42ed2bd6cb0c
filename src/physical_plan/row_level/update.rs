//! [`LanceUpdateExec`]: rewrites updated rows as new fragments and deletes the
//! old ones, in one Lance `Update` transaction.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::internal_err;
use datafusion::common::runtime::JoinSet;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;
use lance::dataset::transaction::{Operation, UpdateMode};
use lance_table::format::Fragment;
use roaring::RoaringTreemap;

use crate::physical_plan::inputs::execute_sources;
use crate::physical_plan::journal::{self, Start};
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::rows::{addresses_of, apply_deletions};
use crate::physical_plan::target::{OpenTarget, WriteTarget};
use crate::physical_plan::transaction::Commit;
use crate::physical_plan::write::{WriteCounts, write_partition};
use crate::physical_plan::writers::{join_writers, write_error};

/// `UPDATE`: its input yields, for every updated row, the new values of all
/// table columns followed by the old row's `_rowaddr`. The new rows are
/// written as new fragments (in parallel, one writer per partition), the old
/// ones deleted, and both committed as ONE `Update` transaction. No row
/// matched → no new version.
pub struct LanceUpdateExec {
    input: Arc<dyn ExecutionPlan>,
    target: Arc<WriteTarget>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceUpdateExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceUpdateExec")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl LanceUpdateExec {
    /// Applies the rows of `input` to `target`.
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, target: Arc<WriteTarget>) -> DFResult<Self> {
        let expected = target.schema.fields().len() + 1;
        if input.schema().fields().len() != expected {
            return internal_err!(
                "UPDATE input has {} columns, expected the {} table columns and _rowaddr",
                input.schema().fields().len(),
                expected - 1
            );
        }
        let properties = one_row_properties(count_schema());
        Ok(Self {
            input,
            target,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// The same statement on `target` (the same table, marked as one
    /// statement on a cluster).
    pub(crate) fn with_target(&self, target: Arc<WriteTarget>) -> Self {
        Self {
            input: Arc::clone(&self.input),
            target,
            properties: Arc::clone(&self.properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }
}

impl DisplayAs for LanceUpdateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LanceUpdateExec: uri={}, read_version={}",
            self.target.display_uri(),
            self.target.read_version()
        )
    }
}

impl ExecutionPlan for LanceUpdateExec {
    fn name(&self) -> &str {
        "LanceUpdateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LanceUpdateExec takes exactly one input");
        }
        Ok(Arc::new(Self::new(
            children.remove(0),
            Arc::clone(&self.target),
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let inputs = execute_sources("LanceUpdateExec", &self.input, partition, &context)?;
        let target = self.target.open_metered(&context, &self.metrics, partition);
        let counts = WriteCounts::new(&self.metrics, partition);
        let fut = async move {
            let _writing = target.in_flight();
            let mark = match journal::start(&target).await? {
                Start::Committed { result, .. } => return count_batch(journal::rows(&result)),
                Start::Run(mark) => mark,
            };
            let rows = journal::marked(mark, update_rows(&target, inputs, &counts)).await?;
            target.metrics.rows_updated.add(rows as usize);
            count_batch(rows)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(fut),
        )))
    }
}

/// Rewrites the rows `inputs` give and commits them; returns how many.
async fn update_rows(
    target: &Arc<OpenTarget>,
    inputs: Vec<SendableRecordBatchStream>,
    counts: &WriteCounts,
) -> DFResult<u64> {
    let (addresses, fragments) = rewrite_rows(inputs, target, counts).await?;
    if addresses.is_empty() {
        target.remove_files(&fragments).await;
        return Ok(0);
    }
    let count = addresses.len();
    commit_update(target, addresses, fragments).await?;
    Ok(count)
}

/// Writes the new rows of every partition and collects the old addresses.
async fn rewrite_rows(
    inputs: Vec<SendableRecordBatchStream>,
    target: &Arc<OpenTarget>,
    counts: &WriteCounts,
) -> DFResult<(RoaringTreemap, Vec<Fragment>)> {
    let columns = target.schema.fields().len();
    let mut writers = JoinSet::new();
    for input in inputs {
        let target = Arc::clone(target);
        let counts = counts.clone();
        writers.spawn(async move {
            let addresses = Arc::new(Mutex::new(RoaringTreemap::new()));
            let seen = Arc::clone(&addresses);
            let schema = Arc::clone(&target.schema);
            let rows = input.map(move |batch| {
                let batch = batch?;
                let found = addresses_of(batch.column(columns).as_ref())?;
                seen.lock().unwrap_or_else(|p| p.into_inner()).extend(found);
                Ok(RecordBatch::try_new(
                    Arc::clone(&schema),
                    batch.columns()[..columns].to_vec(),
                )?)
            });
            let rows: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&target.schema),
                rows,
            ));
            let (_, fragments) = write_partition(rows, Arc::clone(&target), &counts).await?;
            let addresses =
                std::mem::take(&mut *addresses.lock().unwrap_or_else(|p| p.into_inner()));
            Ok((addresses, fragments))
        });
    }
    let (parts, fragments) = join_writers(writers, target).await?;
    let addresses = parts.into_iter().fold(RoaringTreemap::new(), |a, b| a | b);
    Ok((addresses, fragments))
}

/// Deletes the old rows and commits them with the new fragments (which are
/// removed when the statement fails before or at its commit).
async fn commit_update(
    target: &OpenTarget,
    addresses: RoaringTreemap,
    new_fragments: Vec<Fragment>,
) -> DFResult<()> {
    let deleted = match target.base().await {
        Ok(Some(base)) => apply_deletions(&base, &addresses)
            .await
            .map(|deletions| (base, deletions))
            .map_err(|e| write_error(target, "updating", e)),
        Ok(None) => internal_err!("UPDATE needs an existing table"),
        Err(e) => Err(e.into()),
    };
    let (base, (updated_fragments, removed_fragment_ids)) = match deleted {
        Ok(deleted) => deleted,
        Err(e) => {
            target.remove_files(&new_fragments).await;
            return Err(e);
        }
    };
    // Every column counts as modified: no index claims the rewritten rows.
    let all_fields: Vec<u32> = base
        .schema()
        .fields_pre_order()
        .map(|f| f.id as u32)
        .collect();
    let operation = Operation::Update {
        removed_fragment_ids,
        updated_fragments,
        new_fragments,
        fields_modified: vec![],
        compacted_sstables: vec![],
        fields_for_preserving_frag_bitmap: all_fields,
        update_mode: Some(UpdateMode::RewriteRows),
        inserted_rows_filter: None,
        updated_fragment_offsets: None,
    };
    let count = addresses.len();
    let commit = Commit::new(Some(base), operation)
        .with_affected_rows(addresses)
        .with_result(vec![count]);
    target.commit(commit).await?;
    Ok(())
}
