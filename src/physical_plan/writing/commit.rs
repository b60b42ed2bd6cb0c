//! [`LanceCommitExec`]: commits every fragment a statement wrote in ONE Lance
//! transaction, then reports the row count.

use std::fmt;
use std::sync::Arc;

use datafusion::common::internal_err;
use datafusion::common::runtime::JoinSet;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::StreamExt;
use lance::dataset::transaction::{Operation, Transaction};
use lance_table::format::Fragment;

use crate::error::Error;
use crate::physical_plan::fragment_rows::decode_fragments;
use crate::physical_plan::inputs::execute_all;
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::target::{CommitKind, OpenTarget, WriteTarget};
use crate::physical_plan::transaction::{
    Commit, STATEMENT_PROPERTY, ensure_absent, written_fragments,
};
use crate::physical_plan::writers::join_writers;

/// Runs every partition of its input (a [`crate::physical_plan::LanceWriteExec`]) and
/// commits the fragments they deliver as one transaction: one statement,
/// exactly one new version, or none at all.
///
/// * `Append` of nothing commits nothing (no new version) and returns 0.
/// * If a partition fails (Lance removes that writer's partial files), the
///   others run to their end — writers share no state, they only deliver
///   rows — nothing is committed, and the data files every other partition
///   delivered are deleted: the statement leaves no file behind. Only a
///   process killed mid-statement (or a dropped result stream) leaves
///   unreferenced files, which `lance_vacuum` reclaims.
/// * If the commit fails, its data files are deleted unless Lance cannot tell
///   whether the commit happened.
pub struct LanceCommitExec {
    input: Arc<dyn ExecutionPlan>,
    target: Arc<WriteTarget>,
    kind: CommitKind,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl fmt::Debug for LanceCommitExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceCommitExec")
            .field("target", &self.target)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl LanceCommitExec {
    /// Commits what `input` wrote to `target`.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        target: Arc<WriteTarget>,
        kind: CommitKind,
    ) -> Self {
        let properties = one_row_properties(count_schema());
        Self {
            input,
            target,
            kind,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// The table written.
    pub fn target(&self) -> &Arc<WriteTarget> {
        &self.target
    }

    /// How the fragments are committed.
    pub fn kind(&self) -> CommitKind {
        self.kind
    }
}

impl DisplayAs for LanceCommitExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "LanceCommitExec: uri={}, operation={}, read_version={}",
                self.target.display_uri(),
                self.kind,
                self.target.read_version()
            ),
            DisplayFormatType::TreeRender => {
                writeln!(f, "uri={}", self.target.display_uri())?;
                writeln!(f, "operation={}", self.kind)?;
                writeln!(f, "read_version={}", self.target.read_version())
            }
        }
    }
}

impl ExecutionPlan for LanceCommitExec {
    fn name(&self) -> &str {
        "LanceCommitExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("LanceCommitExec takes exactly one input");
        }
        Ok(Arc::new(Self::new(
            children.remove(0),
            Arc::clone(&self.target),
            self.kind,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let inputs = execute_all("LanceCommitExec", &self.input, partition, &context)?;
        let target = self.target.open_metered(&context, &self.metrics, partition);
        let kind = self.kind;
        let fut = async move {
            let _writing = target.in_flight();
            let mark = match &target.journal {
                Some(statement) => {
                    Some(crate::physical_plan::journal::begin(&target, statement).await?)
                }
                None => None,
            };
            let committed = async {
                let (rows, fragments) = collect_fragments(inputs, &target).await?;
                commit_fragments(&target, kind, rows, fragments).await
            }
            .await;
            if committed.is_err() && kind == CommitKind::Create {
                // Nothing of the table it was creating may stay behind.
                if let Some(mark) = mark {
                    mark.release().await;
                }
                target.remove_if_empty().await;
            }
            let rows = committed?;
            match kind {
                CommitKind::Truncate => target.metrics.rows_deleted.add(rows as usize),
                _ => target.metrics.rows_inserted.add(rows as usize),
            }
            count_batch(rows)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(fut),
        )))
    }
}

/// Runs the writers concurrently and gathers their fragments. When one
/// fails, the others finish and every delivered file is removed.
async fn collect_fragments(
    inputs: Vec<SendableRecordBatchStream>,
    target: &OpenTarget,
) -> DFResult<(u64, Vec<Fragment>)> {
    let mut writers = JoinSet::new();
    for mut input in inputs {
        writers.spawn(async move {
            let mut rows = 0u64;
            let mut fragments = Vec::new();
            while let Some(batch) = input.next().await {
                let (r, f) = decode_fragments(&batch?)?;
                rows += r;
                fragments.extend(f);
            }
            Ok((rows, fragments))
        });
    }
    let (rows, fragments) = join_writers(writers, target).await?;
    Ok((rows.iter().sum(), fragments))
}

/// Commits `fragments` as one transaction; returns the statement's row count
/// (the commit of [`LanceCommitExec`] and of [`crate::physical_plan::LanceSink`]). If the
/// statement fails before its transaction reaches Lance (the version it read
/// cannot be opened, a table was created at a `COPY` target meanwhile), the
/// fragments' files are removed here; after that, by the commit path.
pub(crate) async fn commit_fragments(
    target: &OpenTarget,
    kind: CommitKind,
    rows: u64,
    fragments: Vec<Fragment>,
) -> DFResult<u64> {
    if kind == CommitKind::Append && fragments.is_empty() {
        return Ok(0);
    }
    // A commit task an engine runs again after it committed (its executor
    // lost before it reported) finds its statement's version and commits
    // nothing more (checked first: the files are that version's now).
    if let Some(statement) = &target.journal
        && let Some((version, transaction)) = committed_by(target, statement).await?
    {
        log::info!(
            "statement {statement} already committed version {version} of '{}'",
            target.display_uri()
        );
        let (held, _) = written_fragments(&transaction.operation);
        crate::physical_plan::journal::end(target, statement, &held).await;
        return Ok(rows);
    }
    let commit = match prepare(target, kind, &fragments).await {
        Ok(prepare) => prepare.with_result(vec![rows]),
        Err(e) => {
            target.remove_files(&fragments).await;
            return Err(e);
        }
    };
    let committed = target.commit(commit).await?;
    match kind {
        CommitKind::Truncate => Ok(rows_replaced(target, &committed).await),
        _ => Ok(rows),
    }
}

/// The version `statement` committed after the version it read, and its
/// transaction, if any.
pub(crate) async fn committed_by(
    target: &OpenTarget,
    statement: &str,
) -> DFResult<Option<(u64, Transaction)>> {
    let latest = match target.latest().await {
        Ok(latest) => latest,
        // A statement creating the table has not committed it.
        Err(Error::DatasetNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    for version in target.read_version() + 1..=latest.version_id() {
        let transaction = latest
            .read_transaction_by_version(version)
            .await
            .map_err(|e| Error::lance("reading the history of", &target.location.uri, e))?;
        let ours = transaction.filter(|t| {
            t.transaction_properties
                .as_ref()
                .is_some_and(|p| p.get(STATEMENT_PROPERTY).is_some_and(|s| s == statement))
        });
        if let Some(transaction) = ours {
            return Ok(Some((version, transaction)));
        }
    }
    Ok(None)
}

/// The transaction committing `fragments` as `kind`.
async fn prepare(
    target: &OpenTarget,
    kind: CommitKind,
    fragments: &[Fragment],
) -> DFResult<Commit> {
    let base = target.base().await?;
    let fragments = fragments.to_vec();
    let operation = match (kind, &base) {
        (CommitKind::Append, _) => Operation::Append { fragments },
        (CommitKind::Overwrite | CommitKind::Truncate, Some(base)) => Operation::Overwrite {
            fragments,
            schema: base.schema().clone(),
            config_upsert_values: None,
            initial_bases: None,
        },
        (CommitKind::Create, None) => {
            ensure_absent(target).await?;
            let schema = lance::datatypes::Schema::try_from(target.schema.as_ref())
                .map_err(|e| Error::lance("creating", &target.location.uri, e))?;
            Operation::Overwrite {
                fragments,
                schema,
                config_upsert_values: None,
                initial_bases: None,
            }
        }
        (kind, _) => return internal_err!("inconsistent {kind} commit"),
    };
    Ok(Commit::new(base, operation))
}

/// The rows of the version `committed` replaced (what a `TRUNCATE` removed:
/// the version it overwrote may be newer than the one it read, when other
/// writers committed in between).
async fn rows_replaced(target: &OpenTarget, committed: &Arc<lance::Dataset>) -> u64 {
    let previous = committed.version_id().saturating_sub(1);
    let counted = match committed.checkout_version(previous).await {
        Ok(replaced) => replaced.count_rows(None).await,
        Err(e) => Err(e),
    };
    counted.map(|n| n as u64).unwrap_or_else(|e| {
        log::warn!(
            "TRUNCATE of '{}' committed, but the rows of version {previous} could not be \
             counted: {e}",
            target.display_uri()
        );
        0
    })
}
