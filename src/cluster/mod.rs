//! Lance tables on distributed engines. Plans travel as data (see
//! [`crate::LancePhysicalCodec`]): a task carries a table's location, version, e_tag and
//! its fragment ids, and every process opens tables through its own
//! process-level Lance session.
//!
//! * `ballista` (feature `ballista`) — an Apache DataFusion Ballista
//!   cluster (the `lance-cluster` binary, `lance-sql --cluster`);
//! * `distributed` (feature `distributed`) — datafusion-distributed, for
//!   engines that embed it: Lance scans split by fragment across its tasks.

#[cfg(feature = "ballista")]
pub mod ballista;
#[cfg(feature = "distributed")]
pub mod distributed;

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result as DFResult;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;

use crate::physical_plan::{
    LanceCommitExec, LanceDeleteExec, LanceMergeExec, LanceUpdateExec, LanceWriteExec,
};

/// Puts a stage boundary between a commit and its writers, so a cluster runs
/// the writers as separate tasks (on any of its processes) and the commit as
/// one task reading their output rows; the writers mark themselves in flight
/// in the table's directory until the commit ends, so `lance_vacuum` on any
/// process keeps their files. In one process the commit drives its writers
/// directly (and cleans up after a failed one); on a cluster it commits the
/// fragments its input names.
///
/// `DELETE`, `UPDATE` and merges write and commit in one task; this rule
/// names each such statement, so the task marks itself in flight as well, and
/// a run of it after it committed (its executor lost before it reported)
/// finds its version and answers the result it recorded instead of changing
/// the table again.
#[derive(Debug, Default)]
pub struct SpreadWriters;

impl PhysicalOptimizerRule for SpreadWriters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            // A statement that writes and commits in one task is named, so
            // that a run of the task after it committed commits nothing
            // more, and marked in flight while it runs.
            let statement = || uuid::Uuid::new_v4().to_string();
            if let Some(delete) = node.downcast_ref::<LanceDeleteExec>()
                && delete.target().journal.is_none()
            {
                let target = Arc::new(delete.target().with_journal(statement()));
                return Ok(Transformed::yes(Arc::new(delete.with_target(target))));
            }
            if let Some(update) = node.downcast_ref::<LanceUpdateExec>()
                && update.target().journal.is_none()
            {
                let target = Arc::new(update.target().with_journal(statement()));
                return Ok(Transformed::yes(Arc::new(update.with_target(target))));
            }
            if let Some(merge) = node.downcast_ref::<LanceMergeExec>()
                && merge.target().journal.is_none()
            {
                let target = Arc::new(merge.target().with_journal(statement()));
                return Ok(Transformed::yes(Arc::new(merge.with_target(target))));
            }
            let Some(commit) = node.downcast_ref::<LanceCommitExec>() else {
                return Ok(Transformed::no(node));
            };
            let input = Arc::clone(commit.children()[0]);
            let Some(writer) = input.downcast_ref::<LanceWriteExec>() else {
                return Ok(Transformed::no(node));
            };
            // The writers (and the commit) mark themselves in flight in the
            // table's directory under a statement id, so `lance_vacuum` on
            // any process keeps their files — whether or not they run in
            // the commit's task.
            let target = Arc::new(commit.target().with_journal(statement()));
            let partitions = input.properties().partitioning.partition_count();
            let mut writer: Arc<dyn ExecutionPlan> = Arc::new(LanceWriteExec::new(
                Arc::clone(writer.children()[0]),
                Arc::clone(&target),
            ));
            if partitions > 1 {
                writer = Arc::new(CoalescePartitionsExec::new(writer));
            }
            Ok(Transformed::yes(Arc::new(LanceCommitExec::new(
                writer,
                target,
                commit.kind(),
            ))))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "lance_spread_writers"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
