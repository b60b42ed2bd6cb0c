//! What Lance's own plan did inside a [`crate::physical_plan::LanceScanExec`] partition,
//! surfaced as the scan's metrics (`EXPLAIN ANALYZE`): fragments actually
//! read, rows scanned, bytes read and I/O operations, and how many scalar
//! index searches chose the rows to read.
//!
//! A partition runs a Lance plan created in `execute`; its metrics are
//! summed into the scan's when the partition's stream is dropped (finished
//! or cut short by a `LIMIT`).

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};

/// The names of the scan's metrics.
pub(crate) const FRAGMENTS_READ: &str = "fragments_read";
pub(crate) const ROWS_SCANNED: &str = "rows_scanned";
pub(crate) const BYTES_READ: &str = "bytes_read";
pub(crate) const IOPS: &str = "iops";
pub(crate) const INDEX_SEARCHES: &str = "index_searches";

/// Lance plan nodes that answer a filter from a scalar index.
const INDEX_NODES: [&str; 3] = ["ScalarIndexExec", "MaterializeIndexExec", "MapIndexExec"];

/// The counters of one partition.
#[derive(Debug, Clone)]
pub(crate) struct ScanMetrics {
    fragments_read: Count,
    rows_scanned: Count,
    bytes_read: Count,
    iops: Count,
    index_searches: Count,
}

impl ScanMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        Self {
            fragments_read: count(FRAGMENTS_READ),
            rows_scanned: count(ROWS_SCANNED),
            bytes_read: count(BYTES_READ),
            iops: count(IOPS),
            index_searches: count(INDEX_SEARCHES),
        }
    }

    /// Adds what Lance's `plan` (and every node below it) recorded.
    fn add_from(&self, plan: &dyn ExecutionPlan) {
        if INDEX_NODES.contains(&plan.name()) {
            self.index_searches.add(1);
        }
        if let Some(metrics) = plan.metrics() {
            let sum = |name| metrics.sum_by_name(name).map(|v| v.as_usize()).unwrap_or(0);
            self.fragments_read.add(sum("fragments_scanned"));
            self.rows_scanned.add(sum("rows_scanned"));
            self.bytes_read.add(sum("bytes_read"));
            self.iops.add(sum("iops"));
        }
        for child in plan.children() {
            self.add_from(child.as_ref());
        }
    }
}

/// Adds the metrics of a Lance plan to a partition's when dropped: kept
/// alive by the partition's stream.
pub(crate) struct HarvestOnDrop {
    plan: Arc<dyn ExecutionPlan>,
    into: ScanMetrics,
}

impl HarvestOnDrop {
    pub(crate) fn new(plan: Arc<dyn ExecutionPlan>, into: ScanMetrics) -> Self {
        Self { plan, into }
    }
}

impl Drop for HarvestOnDrop {
    fn drop(&mut self) {
        self.into.add_from(self.plan.as_ref());
    }
}
