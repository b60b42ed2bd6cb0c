//! Running a statement node's input: every partition at once, cancellable
//! sources, and narrowing a computed report to the projected columns.

use std::sync::Arc;

use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::projection::ProjectionExec;

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
