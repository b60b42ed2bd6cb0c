//! [`LanceDeleteExec`]: deletes the rows whose addresses its input yields, in
//! one Lance transaction.

use std::fmt;
use std::sync::Arc;

use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use lance::dataset::transaction::Operation;

use crate::physical_plan::inputs::execute_sources;
use crate::physical_plan::journal::{self, Start};
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::rows::{apply_deletions, collect_addresses};
use crate::physical_plan::target::{OpenTarget, WriteTarget};
use crate::physical_plan::transaction::Commit;
use crate::physical_plan::writers::write_error;

/// `DELETE`: its input (any plan, subqueries included) yields the `_rowaddr`
/// of every row to delete; one `Delete` transaction marks them deleted.
/// Nothing matched → no new version.
pub struct LanceDeleteExec {
    input: Arc<dyn ExecutionPlan>,
    target: Arc<WriteTarget>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceDeleteExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceDeleteExec")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl LanceDeleteExec {
    /// Deletes the rows `input` addresses from `target`.
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, target: Arc<WriteTarget>) -> Self {
        let properties = one_row_properties(count_schema());
        Self {
            input,
            target,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The same statement on `target` (the same table, marked as one
    /// statement on a cluster).
    pub(crate) fn with_target(&self, target: Arc<WriteTarget>) -> Self {
        Self::new(Arc::clone(&self.input), target)
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }
}

impl DisplayAs for LanceDeleteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LanceDeleteExec: uri={}, read_version={}",
            self.target.display_uri(),
            self.target.read_version()
        )
    }
}

impl ExecutionPlan for LanceDeleteExec {
    fn name(&self) -> &str {
        "LanceDeleteExec"
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
            return internal_err!("LanceDeleteExec takes exactly one input");
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
        let inputs = execute_sources("LanceDeleteExec", &self.input, partition, &context)?;
        let target = self.target.open_metered(&context, &self.metrics, partition);
        let fut = async move {
            let _writing = target.in_flight();
            let mark = match journal::start(&target).await? {
                Start::Committed { result, .. } => return count_batch(journal::rows(&result)),
                Start::Run(mark) => mark,
            };
            let rows = journal::marked(mark, delete_rows(&target, inputs)).await?;
            target.metrics.rows_deleted.add(rows as usize);
            count_batch(rows)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(fut),
        )))
    }
}

/// Deletes the rows `inputs` address in one transaction; returns how many.
async fn delete_rows(target: &OpenTarget, inputs: Vec<SendableRecordBatchStream>) -> DFResult<u64> {
    let addresses = collect_addresses(inputs, 0).await?;
    if addresses.is_empty() {
        return Ok(0);
    }
    let Some(base) = target.base().await? else {
        return internal_err!("DELETE needs an existing table");
    };
    let (updated_fragments, deleted_fragment_ids) = apply_deletions(&base, &addresses)
        .await
        .map_err(|e| write_error(target, "deleting from", e))?;
    let operation = Operation::Delete {
        updated_fragments,
        deleted_fragment_ids,
        predicate: "datafusion-lance DELETE (rows selected by DataFusion)".into(),
    };
    let count = addresses.len();
    let commit = Commit::new(Some(base), operation)
        .with_affected_rows(addresses)
        .with_result(vec![count]);
    target.commit(commit).await?;
    Ok(count)
}
