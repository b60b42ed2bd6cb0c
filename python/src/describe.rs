//! Plans as DataFusion's Python bindings display them: across the FFI a
//! node shows only its name, so each node of an exported plan is wrapped in
//! [`Described`], whose name is the node's one-line `EXPLAIN` text
//! (`LanceScanExec: uri=…, fragments=…, filter=…`).

use std::fmt;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, displayable,
};

/// `plan` with every node named by its one-line display.
pub(crate) fn described(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .map(|child| described(Arc::clone(child)))
        .collect::<Result<Vec<_>>>()?;
    let plan = if children.is_empty() {
        plan
    } else {
        plan.with_new_children(children)?
    };
    let name = displayable(plan.as_ref()).one_line().to_string();
    Ok(Arc::new(Described {
        name: name.trim_end().to_string(),
        inner: plan,
    }))
}

/// A node named by its display (see the module docs).
#[derive(Debug)]
struct Described {
    name: String,
    inner: Arc<dyn ExecutionPlan>,
}

impl DisplayAs for Described {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt_as(t, f)
    }
}

impl ExecutionPlan for Described {
    fn name(&self) -> &str {
        &self.name
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.inner.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let inner = Arc::clone(&self.inner).with_new_children(children)?;
        Ok(Arc::new(Self {
            name: self.name.clone(),
            inner,
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.inner.execute(partition, context)
    }
}
