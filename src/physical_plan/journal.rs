//! Markers of the statements whose writers run apart from their commit (on
//! a cluster), kept beside the table's data:
//! `<table>/_datafusion_lance/writes/<statement>/<attempt>`.
//!
//! Each writer task puts a marker before it writes a file; the commit removes
//! the statement's markers once it has committed or failed. `lance_vacuum`,
//! on any process, keeps every file newer than the oldest marker, so it never
//! removes the uncommitted files of a statement running elsewhere. Markers
//! older than [`stale_after`] belong to statements that never finished (a
//! lost job) and are ignored.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use datafusion::error::Result as DFResult;
use futures::TryStreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance_io::object_store::ObjectStore;
use object_store_014::path::Path;

use super::target::OpenTarget;
use crate::error::Error;

/// How old a marker may be before `lance_vacuum` ignores it.
pub(crate) fn stale_after() -> TimeDelta {
    TimeDelta::days(7)
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

/// Marks `statement` as writing to `target` (one marker per writer attempt).
pub(crate) async fn begin(target: &OpenTarget, statement: &str) -> DFResult<()> {
    let (store, base) = target.store().await?;
    let marker = writes_dir(&base)
        .join(statement)
        .join(uuid::Uuid::new_v4().to_string());
    store
        .put(&marker, &[])
        .await
        .map_err(|e| Error::lance("marking a write in flight in", &target.location.uri, e))?;
    Ok(())
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

/// When the oldest statement still writing to the table at `base` started,
/// by its markers (stale ones ignored).
pub(crate) async fn oldest(
    store: &ObjectStore,
    base: &Path,
) -> lance::Result<Option<DateTime<Utc>>> {
    let fresh_since = Utc::now() - stale_after();
    store
        .read_dir_all(&writes_dir(base), None)
        .try_fold(None, |oldest: Option<DateTime<Utc>>, meta| async move {
            Ok(if meta.last_modified < fresh_since {
                oldest
            } else {
                Some(oldest.map_or(meta.last_modified, |o| o.min(meta.last_modified)))
            })
        })
        .await
}
