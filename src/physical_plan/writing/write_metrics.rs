//! What a statement changing a table did, as the metrics of its committing
//! node ([`crate::physical_plan::LanceCommitExec`], [`crate::physical_plan::LanceDeleteExec`],
//! [`crate::physical_plan::LanceUpdateExec`], [`crate::physical_plan::LanceMergeExec`]) in `EXPLAIN
//! ANALYZE`: rows inserted, updated and deleted, data and deletion files
//! written, the commit's time, the transactions it submitted (a merge
//! submits another after a conflict; Lance's own rebases are not counted),
//! the version it made, and how many versions other writers committed
//! between the statement's read and its commit.
//!
//! The commit path ([`crate::physical_plan::target::OpenTarget::commit`]) records the
//! commit's figures for every node; each node records its own row counts.

use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, Time,
};
use lance_table::format::Fragment;

/// The names of the metrics.
pub(crate) const ROWS_INSERTED: &str = "rows_inserted";
pub(crate) const ROWS_UPDATED: &str = "rows_updated";
pub(crate) const ROWS_DELETED: &str = "rows_deleted";
pub(crate) const FILES_WRITTEN: &str = "files_written";
pub(crate) const DELETION_FILES_WRITTEN: &str = "deletion_files_written";
pub(crate) const COMMITTED_VERSION: &str = "committed_version";
pub(crate) const CONCURRENT_COMMITS: &str = "concurrent_commits";
pub(crate) const COMMIT_TIME: &str = "commit_time";
pub(crate) const COMMIT_ATTEMPTS: &str = "commit_attempts";

/// The metrics of one partition of a committing node (they run one).
#[derive(Debug, Clone)]
pub(crate) struct WriteMetrics {
    pub(crate) rows_inserted: Count,
    pub(crate) rows_updated: Count,
    pub(crate) rows_deleted: Count,
    files_written: Count,
    deletion_files_written: Count,
    committed_version: Gauge,
    concurrent_commits: Gauge,
    pub(crate) commit_attempts: Count,
    pub(crate) commit_time: Time,
}

impl WriteMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let count = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        let gauge = |name: &'static str| MetricBuilder::new(metrics).gauge(name, partition);
        Self {
            rows_inserted: count(ROWS_INSERTED),
            rows_updated: count(ROWS_UPDATED),
            rows_deleted: count(ROWS_DELETED),
            files_written: count(FILES_WRITTEN),
            deletion_files_written: count(DELETION_FILES_WRITTEN),
            committed_version: gauge(COMMITTED_VERSION),
            concurrent_commits: gauge(CONCURRENT_COMMITS),
            commit_attempts: count(COMMIT_ATTEMPTS),
            commit_time: MetricBuilder::new(metrics).subset_time(COMMIT_TIME, partition),
        }
    }

    /// Metrics nobody reads (a target opened outside a committing node).
    pub(crate) fn unread() -> Self {
        Self::new(&ExecutionPlanMetricsSet::new(), 0)
    }

    /// Records a commit of `new` fragments (and deletion files in
    /// `updated`) read at `read_version` (0: the table is new) that made
    /// `version`.
    pub(crate) fn committed(
        &self,
        new: &[Fragment],
        updated: &[Fragment],
        read_version: u64,
        version: u64,
    ) {
        let files = new.iter().map(|f| f.files.len()).sum();
        self.files_written.add(files);
        let deletions = updated.iter().filter(|f| f.deletion_file.is_some()).count();
        self.deletion_files_written.add(deletions);
        self.committed_version.set(version as usize);
        let others = match read_version {
            0 => 0,
            read => version.saturating_sub(read + 1),
        };
        self.concurrent_commits.set(others as usize);
    }
}
