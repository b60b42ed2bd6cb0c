//! [`LanceSink`]: a DataFusion [`DataSink`] that writes a Lance table with
//! one commit, for engines and paths that plan [`DataSinkExec`] themselves.
//!
//! [`DataSinkExec`]: datafusion::datasource::sink::DataSinkExec

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::sink::DataSink;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};

use crate::physical_plan::commit::commit_fragments;
use crate::physical_plan::target::{CommitKind, WriteTarget};
use crate::physical_plan::write::{WriteCounts, write_partition};

/// Writes its input stream as Lance fragments, then commits them in ONE
/// transaction: the same one-version semantics as `INSERT INTO` (nothing is
/// visible until the commit; a failure leaves no file behind).
///
/// `DataSinkExec` hands a sink a single stream, so the data is written by
/// one writer; this crate's own `INSERT` plans parallel writers and a commit
/// node instead. Use the sink where an engine plans `DataSinkExec` itself
/// ([`crate::LanceTableProvider::data_sink`] makes one).
pub struct LanceSink {
    target: Arc<WriteTarget>,
    kind: CommitKind,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceSink")
            .field("target", &self.target)
            .field("kind", &self.kind)
            .finish()
    }
}

impl LanceSink {
    /// A sink that commits what it writes to `target` as `kind`.
    pub(crate) fn new(target: Arc<WriteTarget>, kind: CommitKind) -> Self {
        Self {
            target,
            kind,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }

    /// How the written fragments are committed.
    pub fn kind(&self) -> CommitKind {
        self.kind
    }
}

impl DisplayAs for LanceSink {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "LanceSink: uri={}, operation={}, read_version={}",
                self.target.display_uri(),
                self.kind,
                self.target.read_version()
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "uri={}", self.target.display_uri())?;
                writeln!(f, "operation={}", self.kind)
            }
        }
    }
}

#[async_trait]
impl DataSink for LanceSink {
    fn schema(&self) -> &SchemaRef {
        &self.target.schema
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    async fn write_all(
        &self,
        data: SendableRecordBatchStream,
        context: &Arc<TaskContext>,
    ) -> DFResult<u64> {
        let target = self.target.open_metered(context, &self.metrics, 0);
        let _writing = target.in_flight();
        let counts = WriteCounts::new(&self.metrics, 0);
        let committed = match write_partition(data, Arc::clone(&target), &counts).await {
            Ok((rows, fragments)) => commit_fragments(&target, self.kind, rows, fragments).await,
            Err(e) => Err(e),
        };
        match &committed {
            Ok(rows) if self.kind == CommitKind::Truncate => {
                target.metrics.rows_deleted.add(*rows as usize)
            }
            Ok(rows) => target.metrics.rows_inserted.add(*rows as usize),
            Err(_) if self.kind == CommitKind::Create => target.remove_if_empty().await,
            Err(_) => {}
        }
        committed
    }
}
