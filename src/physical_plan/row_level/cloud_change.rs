//! [`CloudChangeExec`]: `DELETE` and `UPDATE` on a LanceDB Cloud or
//! Enterprise table (`db://`), each one request the service carries out.

use std::fmt;
use std::sync::Arc;

use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use crate::cloud::{CloudClient, CloudTable};
use crate::error::Result;
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};

/// What a [`CloudChangeExec`] asks the service to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloudChange {
    /// `DELETE`: the rows passing the predicate (Lance SQL; `None` = all).
    Delete { predicate: Option<String> },
    /// `UPDATE`: `SET column = expression` (Lance SQL) on the rows passing
    /// the predicate.
    Update {
        predicate: Option<String>,
        updates: Vec<(String, String)>,
    },
}

/// Everything a [`CloudChangeExec`] does, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudChangeParts {
    /// The table as the statement names it.
    pub name: String,
    pub table: CloudTable,
    pub change: CloudChange,
}

/// Sends one `delete` or `update` request; the service applies it to the
/// latest version and commits one new version. Returns the rows changed:
/// `update` reports them; for `delete` they are the row count of the version
/// before the one it made minus that of the one it made.
#[derive(Debug)]
pub struct CloudChangeExec {
    parts: CloudChangeParts,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl CloudChangeExec {
    pub(crate) fn new(parts: CloudChangeParts) -> Self {
        Self {
            parts,
            properties: one_row_properties(count_schema()),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Everything the node does.
    pub(crate) fn parts(&self) -> &CloudChangeParts {
        &self.parts
    }
}

impl DisplayAs for CloudChangeExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        let uri = &p.table.location.display_uri;
        let (op, predicate) = match &p.change {
            CloudChange::Delete { predicate } => ("delete", predicate),
            CloudChange::Update { predicate, .. } => ("update", predicate),
        };
        let predicate = predicate.as_deref().unwrap_or("true");
        let sep = if matches!(t, DisplayFormatType::TreeRender) {
            "\n"
        } else {
            ", "
        };
        if !matches!(t, DisplayFormatType::TreeRender) {
            write!(f, "CloudChangeExec: ")?;
        }
        write!(f, "table={uri}{sep}op={op}{sep}predicate={predicate}")?;
        if let CloudChange::Update { updates, .. } = &p.change {
            let set: Vec<String> = updates.iter().map(|(c, e)| format!("{c}={e}")).collect();
            write!(f, "{sep}set=[{}]", set.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for CloudChangeExec {
    fn name(&self) -> &str {
        "CloudChangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("CloudChangeExec has no children");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("CloudChangeExec has one partition, {partition} requested");
        }
        let parts = self.parts.clone();
        let changed = MetricBuilder::new(&self.metrics).counter("rows_changed", 0);
        let stream = futures::stream::once(async move {
            let rows = apply(&parts).await?;
            changed.add(rows as usize);
            count_batch(rows)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

async fn apply(parts: &CloudChangeParts) -> Result<u64> {
    let client = CloudClient::connect(&parts.table)?;
    let context = |op: &str| format!("{op} {}", parts.name);
    match &parts.change {
        CloudChange::Delete { predicate } => {
            let predicate = predicate.as_deref().unwrap_or("true");
            let version = client
                .delete(predicate)
                .await
                .map_err(|e| e.prefixed(&context("DELETE FROM")))?;
            let counted = |v| client.count_rows(v, None);
            let after = counted(version).await;
            let before = match version.checked_sub(1) {
                Some(v) if v > 0 => counted(v).await,
                _ => Ok(0),
            };
            match (before, after) {
                (Ok(before), Ok(after)) => Ok(before.saturating_sub(after)),
                (Err(e), _) | (_, Err(e)) => Err(e.prefixed(&format!(
                    "DELETE FROM {}: the rows were deleted (version {version}), but counting \
                     them failed",
                    parts.name
                ))),
            }
        }
        CloudChange::Update { predicate, updates } => {
            let (rows, _version) = client
                .update(predicate.as_deref(), updates)
                .await
                .map_err(|e| e.prefixed(&context("UPDATE")))?;
            Ok(rows)
        }
    }
}
