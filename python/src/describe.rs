//! Plans as DataFusion's Python bindings display them: across the FFI a
//! node shows only its name, so each node of an exported plan is wrapped in
//! [`Described`], whose name is the node's one-line `EXPLAIN` text
//! (`LanceScanExec: uri=…, fragments=…, filter=…`).
//!
//! The top node of an exported scan also runs each partition on this
//! library's runtime ([`exported_scan`]): the other library polls it from
//! its own runtime's threads, and a scan polled there decodes and filters on
//! those threads while Lance's I/O and decoding tasks run on this library's
//! — twice the threads on the same cores. Its batches reach the caller
//! through a channel of two batches per partition.

use std::fmt;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::physical_plan::stream::RecordBatchReceiverStream;
use futures::StreamExt;

use crate::runtime::RUNTIME;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, displayable,
};

/// Batches a spawned partition may have ready before the caller takes them.
const SPAWNED_BUFFER: usize = 2;

/// `plan` with every node named by its one-line display.
pub(crate) fn described(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    describe(plan, false)
}

/// [`described`], each partition of the top node run on this library's
/// runtime (see the module docs).
pub(crate) fn exported_scan(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    describe(plan, true)
}

fn describe(plan: Arc<dyn ExecutionPlan>, spawn: bool) -> Result<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .map(|child| describe(Arc::clone(child), false))
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
        spawn,
    }))
}

/// A node named by its display (see the module docs).
#[derive(Debug)]
struct Described {
    name: String,
    inner: Arc<dyn ExecutionPlan>,
    /// Each partition runs in a task of this library's runtime.
    spawn: bool,
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
            spawn: self.spawn,
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut stream = self.inner.execute(partition, context)?;
        if !self.spawn {
            return Ok(stream);
        }
        let mut builder = RecordBatchReceiverStream::builder(stream.schema(), SPAWNED_BUFFER);
        let sender = builder.tx();
        // On this library's runtime: the task is dropped (and the scan
        // with it) when the caller drops the stream.
        let _entered = RUNTIME.enter();
        builder.spawn(async move {
            while let Some(batch) = stream.next().await {
                if sender.send(batch).await.is_err() {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}
