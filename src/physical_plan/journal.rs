//! Markers of the statements whose writers run apart from their commit (on
//! a cluster), kept beside the table's data:
//! `<table>/_datafusion_lance/writes/<statement>/<attempt>`.
//!
//! Each writer task (and the commit task) puts a marker before it writes and
//! re-puts it every [`refresh_every`] while it runs: a lease. The commit
//! removes the statement's markers once it has committed. `lance_vacuum`, on
//! any process, keeps every file newer than the oldest live marker, so it
//! never removes the uncommitted files of a statement running elsewhere. A
//! marker not refreshed for [`stale_after`] belongs to a statement that
//! failed or was lost (a killed executor, a cancelled job); `lance_vacuum`
//! ignores and deletes it, and the statement's files become ordinary
//! orphans.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use datafusion::error::Result as DFResult;
use futures::TryStreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance_io::object_store::ObjectStore;
use object_store_014::path::Path;

use super::target::OpenTarget;
use crate::error::Error;

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
    refresher: tokio::task::JoinHandle<()>,
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
    let refresher = tokio::spawn(async move {
        loop {
            tokio::time::sleep(refresh_every()).await;
            if let Err(e) = store.put(&marker, &[]).await {
                log::warn!("could not refresh the in-flight marker '{marker}': {e}");
            }
        }
    });
    Ok(Mark { refresher })
}

/// Removes the markers of `statement` (best effort: a marker left behind only
/// delays `lance_vacuum` until it is stale).
pub(crate) async fn end(target: &OpenTarget, statement: &str) {
    let removed = match target.store().await {
        Ok((store, base)) => store
            .remove_dir_all(writes_dir(&base).join(statement))
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = removed {
        log::warn!(
            "could not remove the in-flight markers of a write to '{}': {e}",
            target.location.display_uri
        );
    }
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
