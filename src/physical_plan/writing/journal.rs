//! Markers of the statements whose writers run apart from their commit (on
//! a cluster), kept beside the table's data:
//! `<table>/_datafusion_lance/writes/<statement>/<attempt>`.
//!
//! Each writer task (and the commit task) puts a marker before it writes and
//! re-puts it every [`refresh_every`] while it runs: a lease. A writer that
//! has written its fragments records them in its marker. The commit, once
//! it has committed, removes the files that the statement's markers record
//! but the committed version does not hold — those of attempts whose output
//! never reached it (a task run again after its executor was lost, a
//! speculative copy) — then removes the markers. `lance_vacuum`, on any
//! process, keeps every file newer than the oldest live marker, so it never
//! removes the uncommitted files of a statement running elsewhere. A marker
//! not refreshed for [`stale_after`] belongs to a statement that failed or
//! was lost (a killed executor, a cancelled job); `lance_vacuum` ignores and
//! deletes it, and the statement's files become ordinary orphans.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use datafusion::error::Result as DFResult;
use futures::TryStreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance_io::object_store::ObjectStore;
use lance_table::format::Fragment;
use object_store_014::path::Path;

use crate::error::Error;
use crate::physical_plan::target::OpenTarget;
use crate::physical_plan::transaction::{RESULT_PROPERTY, written_fragments};

/// How often a running task re-puts its marker.
pub(crate) fn refresh_every() -> std::time::Duration {
    std::time::Duration::from_secs(60)
}

/// How old a marker may be before `lance_vacuum` ignores and deletes it.
pub(crate) fn stale_after() -> TimeDelta {
    TimeDelta::minutes(10)
}

/// A task's marker, refreshed until dropped.
#[derive(Debug)]
pub(crate) struct Mark {
    store: Arc<ObjectStore>,
    marker: Path,
    /// What the marker holds: nothing, or the JSON of the fragments the
    /// task wrote.
    content: Arc<Mutex<Vec<u8>>>,
    refresher: tokio::task::JoinHandle<()>,
}

impl Mark {
    /// Stops refreshing the marker and removes it (a marker already removed
    /// with its statement's is fine).
    pub(crate) async fn release(self) {
        self.refresher.abort();
        match self.store.delete(&self.marker).await {
            Ok(()) | Err(lance::Error::NotFound { .. }) => {}
            Err(e) => log::debug!(
                "could not remove the in-flight marker '{}': {e}",
                self.marker
            ),
        }
    }

    /// Records the fragments this attempt wrote, so the commit can remove
    /// their files if this attempt's output never reaches it (best effort:
    /// unrecorded files are left to `lance_vacuum`).
    pub(crate) async fn record(&self, fragments: &[Fragment]) {
        if fragments.is_empty() {
            return;
        }
        let json = match serde_json::to_vec(fragments) {
            Ok(json) => json,
            Err(e) => {
                log::warn!(
                    "could not record written fragments in '{}': {e}",
                    self.marker
                );
                return;
            }
        };
        *self.content.lock().unwrap_or_else(|e| e.into_inner()) = json.clone();
        if let Err(e) = self.store.put(&self.marker, &json).await {
            log::warn!(
                "could not record written fragments in '{}': {e}",
                self.marker
            );
        }
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.refresher.abort();
    }
}

/// The directory of every statement's markers under a table's `base`.
fn writes_dir(base: &Path) -> Path {
    base.clone().join("_datafusion_lance").join("writes")
}

impl OpenTarget {
    /// The store the table lives in, and the table's base path in it.
    pub(crate) async fn store(&self) -> crate::error::Result<(Arc<ObjectStore>, Path)> {
        let (store, base, _) = DatasetBuilder::from_uri(&self.location.uri)
            .with_session(Arc::clone(self.cache.session()))
            .with_store_params(self.params.clone())
            .build_object_store()
            .await
            .map_err(|e| Error::lance("opening the store of", &self.location.uri, e))?;
        Ok((store, base))
    }
}

impl OpenTarget {
    /// After a statement creating the table failed: removes what is left of
    /// the table's directory (the empty directories its writers made, which
    /// would otherwise look like a table) when it holds no file at all. A
    /// table created meanwhile by another writer holds files and is kept.
    pub(crate) async fn remove_if_empty(&self) {
        let removed = async {
            let (store, base) = self.store().await.map_err(|e| e.to_string())?;
            let left: Vec<_> = store
                .read_dir_all(&base, None)
                .try_collect()
                .await
                .map_err(|e| e.to_string())?;
            if left.is_empty() {
                store
                    .remove_dir_all(base)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(())
        };
        if let Err(e) = removed.await {
            log::warn!(
                "could not remove what a failed write left at '{}': {e}",
                self.location.display_uri
            );
        }
    }
}

/// Marks `statement` as writing to `target` (one marker per task attempt)
/// until the returned lease drops.
pub(crate) async fn begin(target: &OpenTarget, statement: &str) -> DFResult<Mark> {
    let (store, base) = target.store().await?;
    let marker = writes_dir(&base)
        .join(statement)
        .join(uuid::Uuid::new_v4().to_string());
    store
        .put(&marker, &[])
        .await
        .map_err(|e| Error::lance("marking a write in flight in", &target.location.uri, e))?;
    let content = Arc::new(Mutex::new(Vec::new()));
    let refresher = {
        let (store, marker, content) = (Arc::clone(&store), marker.clone(), Arc::clone(&content));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(refresh_every()).await;
                let now = content.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Err(e) = store.put(&marker, &now).await {
                    log::warn!("could not refresh the in-flight marker '{marker}': {e}");
                }
            }
        })
    };
    Ok(Mark {
        store,
        marker,
        content,
        refresher,
    })
}

/// How a task that both writes and commits (DELETE, UPDATE, a merge) starts.
pub(crate) enum Start {
    /// A run of this task committed the statement already (its executor was
    /// lost before it reported): the version and the result it recorded.
    Committed { version: u64, result: Vec<u64> },
    /// Run it, marked in flight while it runs when it is on a cluster.
    Run(Option<Mark>),
}

/// Starts a task that both writes and commits: on a cluster (its target
/// names a statement) it first looks for a version its statement committed.
pub(crate) async fn start(target: &OpenTarget) -> DFResult<Start> {
    let Some(statement) = &target.journal else {
        return Ok(Start::Run(None));
    };
    if let Some((version, transaction)) =
        crate::physical_plan::commit::committed_by(target, statement).await?
    {
        let (held, _) = written_fragments(&transaction.operation);
        end(target, statement, &held).await;
        let result = transaction
            .transaction_properties
            .and_then(|p| p.get(RESULT_PROPERTY).cloned())
            .and_then(|r| serde_json::from_str(&r).ok())
            .unwrap_or_default();
        return Ok(Start::Committed { version, result });
    }
    Ok(Start::Run(Some(begin(target, statement).await?)))
}

/// The row count a statement recorded (its result's first value).
pub(crate) fn rows(result: &[u64]) -> u64 {
    result.first().copied().unwrap_or(0)
}

/// Runs `work`, a task that writes and commits, under `mark`, then removes
/// the mark: a commit has removed it already, and a failed task has removed
/// its files, so nothing of it is left to protect.
pub(crate) async fn marked<T>(
    mark: Option<Mark>,
    work: impl Future<Output = DFResult<T>>,
) -> DFResult<T> {
    let result = work.await;
    if let Some(mark) = mark {
        mark.release().await;
    }
    result
}

/// After `statement` committed `committed`: removes the files its markers
/// record that `committed` does not hold (attempts whose output the commit
/// never received), then the markers (best effort: a file or marker left
/// behind is removed by `lance_vacuum` later). Returns how many fragments'
/// files were removed.
pub(crate) async fn end(target: &OpenTarget, statement: &str, committed: &[Fragment]) -> usize {
    let ended = async {
        let (store, base) = target.store().await.map_err(|e| e.to_string())?;
        let dir = writes_dir(&base).join(statement);
        let lost = lost_fragments(&store, &dir, committed).await;
        target.remove_files(&lost).await;
        store.remove_dir_all(dir).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(lost.len())
    };
    ended.await.unwrap_or_else(|e| {
        log::warn!(
            "could not remove the in-flight markers of a write to '{}': {e}",
            target.location.display_uri
        );
        0
    })
}

/// The fragments the markers in `dir` record whose files `committed` does
/// not hold. Lance names every data file afresh, so a file recorded by one
/// attempt is either committed or referenced by no version.
async fn lost_fragments(store: &ObjectStore, dir: &Path, committed: &[Fragment]) -> Vec<Fragment> {
    let held: HashSet<&str> = committed
        .iter()
        .flat_map(|f| &f.files)
        .map(|f| f.path.as_str())
        .collect();
    let markers: Vec<_> = match store.read_dir_all(dir, None).try_collect().await {
        Ok(markers) => markers,
        Err(e) => {
            log::warn!("could not list the in-flight markers in '{dir}': {e}");
            return Vec::new();
        }
    };
    let mut lost = Vec::new();
    for meta in markers {
        let recorded = match store.read_one_all(&meta.location).await {
            Ok(bytes) if bytes.is_empty() => continue,
            Ok(bytes) => serde_json::from_slice::<Vec<Fragment>>(&bytes).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match recorded {
            Ok(fragments) => lost.extend(fragments.into_iter().filter(|f| {
                f.files
                    .iter()
                    .all(|file| !held.contains(file.path.as_str()))
            })),
            Err(e) => log::warn!(
                "could not read the in-flight marker '{}': {e}",
                meta.location
            ),
        }
    }
    lost
}

/// When the oldest task still writing to the table at `base` last renewed
/// its marker; stale markers are deleted (best effort).
pub(crate) async fn oldest(
    store: &ObjectStore,
    base: &Path,
) -> lance::Result<Option<DateTime<Utc>>> {
    let fresh_since = Utc::now() - stale_after();
    let markers: Vec<_> = store
        .read_dir_all(&writes_dir(base), None)
        .try_collect()
        .await?;
    let mut oldest: Option<DateTime<Utc>> = None;
    for meta in markers {
        if meta.last_modified < fresh_since {
            if let Err(e) = store.delete(&meta.location).await {
                log::warn!("could not remove the stale marker '{}': {e}", meta.location);
            }
        } else {
            oldest = Some(oldest.map_or(meta.last_modified, |o| o.min(meta.last_modified)));
        }
    }
    Ok(oldest)
}
