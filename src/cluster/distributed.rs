//! Lance on [datafusion-distributed] 3.0: the same nodes and codec under an
//! engine an embedder runs, with Lance scans split by fragment across tasks.
//!
//! A coordinator plans a statement once (one version per table, as in one
//! process), cuts it into stages and sends each task its plan over gRPC,
//! encoded with [`crate::LancePhysicalCodec`]. A Lance scan becomes one
//! variant per task, each with its own fragment groups
//! ([`LanceDistributedExt`]); a worker decodes its variant and reads those
//! fragments through its process's shared Lance session. `SET lance.…`
//! settings travel with every task.
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> datafusion::error::Result<()> {
//! use datafusion::prelude::{SessionConfig, SessionContext};
//! use datafusion_lance::cluster::distributed::{Workers, coordinator_state, serve_worker};
//!
//! // Two workers (in their own processes or, as here, tasks) on loopback.
//! let mut urls = Vec::new();
//! for _ in 0..2 {
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//!     urls.push(format!("http://{}", listener.local_addr()?));
//!     tokio::spawn(serve_worker(listener));
//! }
//!
//! // The coordinator: Lance registered, the distributed planner on.
//! let ctx = SessionContext::new_with_state(coordinator_state(
//!     SessionConfig::new().with_target_partitions(4),
//!     Workers::new(&urls)?,
//! ));
//! # let dir = tempfile::tempdir().unwrap();
//! # let uri = dir.path().join("t.lance");
//! # let uri = uri.to_str().unwrap();
//! ctx.sql(&format!(
//!     "CREATE EXTERNAL TABLE t (id BIGINT, v DOUBLE) STORED AS LANCE LOCATION '{uri}'"
//! )).await?;
//! ctx.sql("INSERT INTO t VALUES (1, 0.5), (2, 1.5), (3, 2.5)").await?.collect().await?;
//! let rows = ctx.sql("SELECT sum(v) AS total FROM t WHERE id > 1").await?.collect().await?;
//! assert_eq!(
//!     datafusion::arrow::util::pretty::pretty_format_batches(&rows)?.to_string(),
//!     "+-------+\n| total |\n+-------+\n| 4.0   |\n+-------+"
//! );
//! # Ok(())
//! # }
//! ```
//!
//! [datafusion-distributed]: https://github.com/datafusion-contrib/datafusion-distributed

use std::sync::Arc;

use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::session_state::SessionState;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    DesiredTaskCountEvent, DesiredTaskCountEventResponse, DistributedExt, DistributedLeafExec,
    ScaleUpLeafNodeEvent, ScaleUpLeafNodeEventResponse, SessionStateBuilderExt, Worker,
    WorkerQueryContext, WorkerResolver,
};
use url::Url;

use crate::codec::LancePhysicalCodec;
use crate::config::LanceConfig;
use crate::physical_plan::{GroupRows, LanceScanExec, ScanParts};

use super::SpreadWriters;

/// Lance on a datafusion-distributed session builder.
pub trait LanceDistributedExt: Sized {
    /// Adds the Lance codec, sends the `lance.*` settings with every task,
    /// splits each Lance scan's fragment groups across tasks (one task per
    /// group at most) and runs writers apart from their commit
    /// ([`SpreadWriters`]).
    fn with_lance_distributed(self) -> Self;
}

impl LanceDistributedExt for SessionStateBuilder {
    fn with_lance_distributed(mut self) -> Self {
        // Keep the settings the builder's config already holds.
        let settings = self
            .config()
            .as_ref()
            .and_then(|c| c.options().extensions.get::<LanceConfig>().cloned())
            .unwrap_or_default();
        self.with_distributed_user_codec(LancePhysicalCodec::new())
            .with_distributed_option_extension(settings)
            .with_distributed_desired_task_count_handler(desired_task_count)
            .with_distributed_scale_up_leaf_node_handler(scale_up_scan)
            .with_physical_optimizer_rule(Arc::new(SpreadWriters))
    }
}

/// A Lance scan wants one task per fragment group.
fn desired_task_count(
    event: DesiredTaskCountEvent,
) -> Option<DFResult<DesiredTaskCountEventResponse>> {
    let scan = event.plan.downcast_ref::<LanceScanExec>()?;
    let groups = scan
        .fragment_groups()
        .iter()
        .filter(|g| !g.is_empty())
        .count();
    Some(Ok(DesiredTaskCountEventResponse::desired(groups.max(1))))
}

/// One variant of a Lance scan per task: the fragment groups are dealt out
/// to the tasks in turn (every variant has as many partitions; a task short
/// of groups reads nothing in its last ones).
fn scale_up_scan(event: ScaleUpLeafNodeEvent) -> Option<DFResult<ScaleUpLeafNodeEventResponse>> {
    let scan = event.plan.downcast_ref::<LanceScanExec>()?;
    if event.task_count <= 1 {
        return None;
    }
    let parts = scan.parts();
    let variants = split_groups(&parts, event.task_count)
        .into_iter()
        .map(|parts| Arc::new(LanceScanExec::from_parts(parts)) as _);
    Some(
        DistributedLeafExec::try_new(Arc::clone(event.plan), variants)
            .map(|leaf| ScaleUpLeafNodeEventResponse::new(Arc::new(leaf))),
    )
}

/// `parts` split into `tasks` scans of equally many partitions, groups dealt
/// out in turn.
fn split_groups(parts: &ScanParts, tasks: usize) -> Vec<ScanParts> {
    let per_task = parts.groups.len().div_ceil(tasks).max(1);
    (0..tasks)
        .map(|task| {
            let mut groups = Vec::with_capacity(per_task);
            let mut group_rows = Vec::with_capacity(per_task);
            for i in (0..per_task).map(|round| round * tasks + task) {
                match (parts.groups.get(i), parts.group_rows.get(i)) {
                    (Some(group), Some(rows)) => {
                        groups.push(group.clone());
                        group_rows.push(*rows);
                    }
                    _ => {
                        groups.push(Vec::new());
                        group_rows.push(GroupRows {
                            rows: 0,
                            exact: true,
                        });
                    }
                }
            }
            ScanParts {
                groups,
                group_rows,
                ..parts.clone()
            }
        })
        .collect()
}

/// A coordinator session: DataFusion's defaults, the distributed planner
/// sending tasks to `workers`, and Lance registered (one version per table
/// per statement, the table functions, the shared Lance session).
pub fn coordinator_state(
    config: SessionConfig,
    workers: impl WorkerResolver + 'static,
) -> SessionState {
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_distributed_worker_resolver(workers)
        .with_distributed_planner()
        .with_lance_distributed()
        .build();
    let ctx = SessionContext::new_with_state(state);
    crate::register_lance(&ctx).expect("registering Lance on a fresh context cannot fail");
    ctx.state()
}

/// A worker that runs Lance tasks: it decodes them with the Lance codec and
/// takes the `lance.*` settings from each task's headers.
pub fn worker() -> Worker {
    Worker::from_session_builder(|ctx: WorkerQueryContext| async move {
        Ok(ctx
            .builder
            .with_distributed_option_extension_from_headers::<LanceConfig>(&ctx.headers)?
            .with_distributed_user_codec(LancePhysicalCodec::new())
            .build())
    })
}

/// Serves [`worker`] on `listener` until the process ends (or the returned
/// future is dropped).
pub async fn serve_worker(listener: tokio::net::TcpListener) -> DFResult<()> {
    tonic::transport::Server::builder()
        .add_service(worker().into_worker_server())
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))
}

/// A fixed list of worker URLs (`http://HOST:PORT`).
#[derive(Debug, Clone)]
pub struct Workers(Vec<Url>);

impl Workers {
    /// The workers at `urls`; an error names a URL that does not parse.
    pub fn new(urls: &[impl AsRef<str>]) -> DFResult<Self> {
        urls.iter()
            .map(|url| {
                Url::parse(url.as_ref()).map_err(|e| {
                    DataFusionError::Configuration(format!("worker URL '{}': {e}", url.as_ref()))
                })
            })
            .collect::<DFResult<Vec<_>>>()
            .map(Self)
    }
}

impl WorkerResolver for Workers {
    fn get_urls(&self) -> DFResult<Vec<Url>> {
        Ok(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_dealt_out_in_turn_with_equal_partition_counts() {
        let parts = |groups: Vec<Vec<u64>>| ScanParts {
            group_rows: groups
                .iter()
                .map(|g| GroupRows {
                    rows: g.len() * 10,
                    exact: true,
                })
                .collect(),
            groups,
            location: crate::location::TableLocation::new("/tmp/t.lance", Default::default()),
            snapshot: crate::location::Snapshot {
                version: 1,
                e_tag: None,
            },
            columns: vec![],
            schema: Arc::new(arrow::datatypes::Schema::empty()),
            filter: None,
            limit: None,
            options: Default::default(),
        };
        let split = split_groups(
            &parts(vec![vec![0, 1], vec![2], vec![3], vec![4, 5, 6], vec![7]]),
            4,
        );
        let groups: Vec<_> = split.iter().map(|p| p.groups.clone()).collect();
        assert_eq!(
            groups,
            [
                vec![vec![0, 1], vec![7]],
                vec![vec![2], vec![]],
                vec![vec![3], vec![]],
                vec![vec![4, 5, 6], vec![]],
            ]
        );
        assert_eq!(split[3].group_rows[0].rows, 30);
        assert_eq!(split[1].group_rows[1].rows, 0);
    }
}
