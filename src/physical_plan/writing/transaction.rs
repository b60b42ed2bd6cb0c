//! The one commit path of every statement that changes a table — INSERT,
//! OVERWRITE, TRUNCATE, COPY, CREATE, DELETE, UPDATE and merges: build the
//! transaction, commit it through the task's Lance session with the
//! statement's commit budget, serve the new version to the next query, and
//! on failure remove the files the statement wrote (unless Lance cannot tell
//! whether the commit happened) and name what went wrong.

use std::sync::Arc;
use std::time::Instant;

use datafusion::error::{DataFusionError, Result as DFResult};
use lance::Dataset;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{CommitBuilder, WriteDestination};
use lance_select::RowAddrTreeMap;
use lance_table::format::Fragment;

use crate::error::Error;
use crate::physical_plan::rows::remove_new_deletion_files;
use crate::physical_plan::target::OpenTarget;

/// The Lance transaction property naming the statement that committed it.
pub(crate) const STATEMENT_PROPERTY: &str = "datafusion-lance.statement";

/// The Lance transaction property holding the committing statement's result
/// (a JSON array of row counts).
pub(crate) const RESULT_PROPERTY: &str = "datafusion-lance.result";

/// One transaction a statement commits, with the files it wrote for it.
pub(crate) struct Commit {
    /// The version the transaction was built on (`None`: it creates the table).
    base: Option<Arc<Dataset>>,
    transaction: Transaction,
    /// Fragments whose data files this statement wrote.
    new_fragments: Vec<Fragment>,
    /// Fragments whose deletion files this statement may have written.
    updated_fragments: Vec<Fragment>,
    /// Rows the transaction touches, so Lance can rebase it over disjoint
    /// concurrent row-level changes.
    affected_rows: Option<RowAddrTreeMap>,
    /// The statement's result (row counts), kept in the transaction on a
    /// cluster so a task run again after it committed can answer it.
    result: Vec<u64>,
}

/// The fragments an operation's statement wrote data files for, and those
/// whose deletion files it may have written.
pub(crate) fn written_fragments(operation: &Operation) -> (Vec<Fragment>, Vec<Fragment>) {
    match operation {
        Operation::Append { fragments } | Operation::Overwrite { fragments, .. } => {
            (fragments.clone(), Vec::new())
        }
        Operation::Update {
            new_fragments,
            updated_fragments,
            ..
        } => (new_fragments.clone(), updated_fragments.clone()),
        Operation::Delete {
            updated_fragments, ..
        } => (Vec::new(), updated_fragments.clone()),
        _ => (Vec::new(), Vec::new()),
    }
}

impl Commit {
    /// `operation` on `base` (`None` creates the table).
    pub(crate) fn new(base: Option<Arc<Dataset>>, operation: Operation) -> Self {
        let read_version = base.as_ref().map_or(0, |b| b.version_id());
        Self::of(base, Transaction::new(read_version, operation, None))
    }

    /// A transaction Lance built on `base` (a merge-insert job's).
    pub(crate) fn of(base: Option<Arc<Dataset>>, transaction: Transaction) -> Self {
        let (new_fragments, updated_fragments) = written_fragments(&transaction.operation);
        Self {
            base,
            transaction,
            new_fragments,
            updated_fragments,
            affected_rows: None,
            result: Vec::new(),
        }
    }

    /// The statement's result, returned again by a task of the same
    /// statement run after this commit (on a cluster).
    pub(crate) fn with_result(mut self, result: Vec<u64>) -> Self {
        self.result = result;
        self
    }

    /// Names the statement (and its result) in the transaction's properties,
    /// so a task of the same statement run again can find it.
    fn name_statement(&mut self, statement: &str) {
        let mut properties = self
            .transaction
            .transaction_properties
            .as_deref()
            .cloned()
            .unwrap_or_default();
        properties.insert(STATEMENT_PROPERTY.to_string(), statement.to_string());
        if let Ok(result) = serde_json::to_string(&self.result) {
            properties.insert(RESULT_PROPERTY.to_string(), result);
        }
        self.transaction.transaction_properties = Some(Arc::new(properties));
    }

    /// Declares the rows the transaction touches.
    pub(crate) fn with_affected_rows(mut self, rows: impl Into<RowAddrTreeMap>) -> Self {
        self.affected_rows = Some(rows.into());
        self
    }
}

impl OpenTarget {
    /// Commits `commit`; on failure the statement's files are removed and
    /// the error says what happened (conflict, spent budget, ...).
    pub(crate) async fn commit(&self, commit: Commit) -> DFResult<Arc<Dataset>> {
        let started = Instant::now();
        match self.try_commit(commit).await {
            Ok(dataset) => Ok(dataset),
            Err(e) => Err(commit_error(self, e, started).await),
        }
    }

    /// Like [`Self::commit`], returning Lance's error unconverted (for a
    /// caller that retries some of them; convert with [`commit_error`]).
    pub(crate) async fn try_commit(&self, mut commit: Commit) -> lance::Result<Arc<Dataset>> {
        if let Some(statement) = &self.journal {
            commit.name_statement(statement);
        }
        let Commit {
            base,
            transaction,
            new_fragments,
            updated_fragments,
            affected_rows,
            result: _,
        } = commit;
        let dest = match &base {
            Some(base) => WriteDestination::Dataset(Arc::clone(base)),
            None => WriteDestination::Uri(&self.location.uri),
        };
        // Other writers' commits count from the version the statement
        // planned against, not the attempt's base (a retry reads again).
        let read_version = match &self.read {
            Some(snapshot) => snapshot.version,
            None => base.as_ref().map_or(0, |b| b.version_id()),
        };
        let _timer = self.metrics.commit_time.timer();
        self.metrics.commit_attempts.add(1);
        let mut builder = self.commit_builder(dest);
        if base.is_none() {
            builder = builder
                .with_storage_format(self.options.storage_version)
                .use_stable_row_ids(self.options.stable_row_ids);
        }
        if let Some(rows) = affected_rows {
            builder = builder.with_affected_rows(rows);
        }
        match builder.execute(transaction).await {
            Ok(committed) => {
                let committed = Arc::new(committed);
                self.metrics.committed(
                    &new_fragments,
                    &updated_fragments,
                    read_version,
                    committed.version_id(),
                );
                self.note_committed(Arc::clone(&committed));
                // Committed: the statement's files are referenced now. (After
                // a failure its marks are left to lapse: the engine may run
                // the commit again with the writers' files.)
                if let Some(statement) = &self.journal {
                    crate::physical_plan::journal::end(self, statement, &new_fragments).await;
                }
                Ok(committed)
            }
            Err(e) => {
                if !e.is_commit_status_unknown() {
                    self.remove_files(&new_fragments).await;
                    if let Some(base) = &base {
                        remove_new_deletion_files(base, &updated_fragments).await;
                    }
                }
                Err(e)
            }
        }
    }

    /// A Lance commit to `dest` through this task's session, with the
    /// statement's commit budget; Lance's automatic cleanup stays off.
    fn commit_builder<'a>(&self, dest: WriteDestination<'a>) -> CommitBuilder<'a> {
        CommitBuilder::new(dest)
            .with_session(Arc::clone(self.cache.session()))
            .with_store_params(self.params.clone())
            .with_skip_auto_cleanup(true)
            .with_max_retries(self.commit_budget.max_retries)
            .with_retry_timeout(self.commit_budget.retry_timeout)
    }

    /// Deletes the data files of `fragments` (best effort; failures are
    /// logged, and `lance_vacuum` removes what is left).
    pub(crate) async fn remove_files(&self, fragments: &[Fragment]) {
        if fragments.is_empty() {
            return;
        }
        let (store, base) = match self.store().await {
            Ok(parts) => parts,
            Err(e) => {
                log::warn!(
                    "could not clean up data files of a failed write to '{}': {e}",
                    self.location.display_uri
                );
                return;
            }
        };
        for file in fragments.iter().flat_map(|f| &f.files) {
            let path = base.clone().join("data").join(file.path.as_str());
            if let Err(e) = store.delete(&path).await {
                log::warn!("could not remove orphaned data file '{path}': {e}");
            }
        }
    }
}

/// A statement that creates a table must not replace one (checked when
/// planning, and again by the commit for one created meanwhile).
pub(crate) async fn ensure_absent(target: &OpenTarget) -> DFResult<()> {
    match target.latest().await {
        Err(Error::DatasetNotFound { .. }) => Ok(()),
        Ok(_) => Err(Error::already_exists(format!(
            "a Lance dataset already exists at '{}'; use INSERT INTO or INSERT OVERWRITE",
            target.display_uri()
        ))
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// Converts a failed commit into the statement's error: a conflict, a spent
/// commit budget (naming how many commits raced it), a table created
/// concurrently (for statements that create one), or a Lance error. `started` is when the statement began
/// committing.
pub(crate) async fn commit_error(
    target: &OpenTarget,
    e: lance::Error,
    started: Instant,
) -> DataFusionError {
    if target.read.is_none() {
        return create_error(target, e);
    }
    let budget_spent = match &e {
        lance::Error::TooMuchWriteContention { .. } => true,
        // Lance reports exhausted retries as a commit conflict.
        lance::Error::CommitConflict { source, .. } => source
            .to_string()
            .contains("Failed to commit the transaction after"),
        _ => false,
    };
    if budget_spent {
        let read_version = target.read_version();
        let latest = target
            .latest()
            .await
            .map(|d| d.version_id())
            .unwrap_or(read_version);
        return Error::WriteContention {
            table: target.table.clone(),
            seconds: started.elapsed().as_secs_f64(),
            max_retries: target.commit_budget.max_retries,
            timeout_ms: target.commit_budget.retry_timeout.as_millis(),
            read_version,
            raced: latest.saturating_sub(read_version),
            source: e,
        }
        .into();
    }
    match e {
        lance::Error::CommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::RetryableCommitConflict { .. } => Error::CommitConflict {
            table: target.table.clone(),
            source: e,
        }
        .into(),
        e => Error::lance("committing to", &target.location.uri, e).into(),
    }
}

/// The error of a statement creating a table (`CREATE EXTERNAL TABLE` with
/// columns, `COPY ... STORED AS LANCE`): any conflict means another writer
/// created the table first.
fn create_error(target: &OpenTarget, e: lance::Error) -> DataFusionError {
    match e {
        lance::Error::DatasetAlreadyExists { .. }
        | lance::Error::CommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::RetryableCommitConflict { .. }
        | lance::Error::TooMuchWriteContention { .. } => Error::already_exists(format!(
            "a Lance dataset was created at '{}' concurrently; nothing was written",
            target.display_uri()
        ))
        .into(),
        e => Error::lance("creating", &target.location.uri, e).into(),
    }
}
