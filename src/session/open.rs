//! Opening datasets through a [`LanceSessionCache`]: single-flight loads,
//! warm opens of the latest version without manifest reads, pinned versions
//! and tags looked up on every registration.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance_io::object_store::ObjectStoreParams;
use lance_table::io::commit::ManifestLocation;
use object_store_014::path::Path;

use super::{
    LanceSessionCache, LoadKey, StoreParts, TableKey, TableState, session_sharing_disabled,
};
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::location::{Snapshot, redact_uri};

impl LanceSessionCache {
    /// Opens the committed `snapshot` of the table at `uri`, known to exist
    /// (a version a plan was made for): the dataset this cache holds for it
    /// when there is one, with no I/O; else one load, shared by concurrent
    /// callers and kept while the manifest has an e_tag.
    pub async fn open_snapshot(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        snapshot: &Snapshot,
    ) -> Result<Arc<Dataset>> {
        // Only loads are counted: a task finding the version held is free.
        if session_sharing_disabled() {
            return self
                .open(uri, params, &VersionSpec::Version(snapshot.version))
                .await;
        }
        let state = self.table_state(TableKey {
            uri: uri.to_string(),
            params: params.clone(),
        });
        let held = state.head.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(head) = held
            && head.version_id() == snapshot.version
            && e_tags_match(
                head.manifest_location().e_tag.as_deref(),
                snapshot.e_tag.as_deref(),
            )
        {
            return Ok(head);
        }
        let key = LoadKey::Pinned {
            version: snapshot.version,
            e_tag: snapshot.e_tag.clone(),
        };
        let version = snapshot.version;
        self.single_flight(&state, key, || async {
            self.counters.loads.fetch_add(1, Ordering::Relaxed);
            let builder = DatasetBuilder::from_uri(uri)
                .with_session(Arc::clone(&self.session))
                .with_store_params(params.clone())
                .with_version(version);
            no_panic(&format!("{uri} (version {version})"), builder.load())
                .await
                .map(Arc::new)
        })
        .await
        .map_err(|e| Error::lance("opening", uri, e))
    }

    /// Opens `uri` at `version` through this cache.
    ///
    /// `uri` must already be normalised ([`crate::storage::normalize_uri`]).
    pub async fn open(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        version: &VersionSpec,
    ) -> Result<Arc<Dataset>> {
        self.counters.opens.fetch_add(1, Ordering::Relaxed);
        if session_sharing_disabled() {
            self.counters.loads.fetch_add(1, Ordering::Relaxed);
            let builder = pin(
                DatasetBuilder::from_uri(uri).with_store_params(params.clone()),
                version,
            );
            let ds = builder
                .load()
                .await
                .map_err(|e| Error::lance("opening", uri, e))?;
            return Ok(Arc::new(ds));
        }
        let state = self.table_state(TableKey {
            uri: uri.to_string(),
            params: params.clone(),
        });
        match version {
            VersionSpec::Latest => self.open_latest(uri, params, &state).await,
            pinned => self.open_pinned(uri, params, &state, pinned).await,
        }
    }

    /// Opens a pinned version. Where it points is looked up on every call —
    /// a tag may have moved, a version may have been removed by a cleanup in
    /// another process — and only the manifest load is shared: an immutable
    /// manifest is cached by (uri, version, e_tag).
    async fn open_pinned(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        state: &TableState,
        pinned: &VersionSpec,
    ) -> Result<Arc<Dataset>> {
        let parts = self.store_parts(uri, params, state).await?;
        let version = match pinned {
            VersionSpec::Latest => return self.open_latest(uri, params, state).await,
            VersionSpec::Version(v) => *v,
            VersionSpec::Tag(tag) => {
                // Tags are read through the latest version.
                let latest = self.open_latest(uri, params, state).await?;
                let contents = match latest.tags().get(tag).await {
                    Ok(contents) => contents,
                    Err(source) => {
                        return Err(Error::VersionNotFound {
                            uri: redact_uri(uri),
                            what: pinned.to_string(),
                            latest: latest.version_id(),
                            source,
                        });
                    }
                };
                if let Some(branch) = contents.branch {
                    return Err(Error::not_supported(format!(
                        "tag '{tag}' of the Lance dataset at '{}' points to branch '{branch}'; \
                         only tags of the main branch can be read",
                        redact_uri(uri)
                    )));
                }
                contents.version
            }
        };
        let location = match parts
            .commit_handler
            .resolve_version_location(&parts.base, version, parts.store.inner.as_ref())
            .await
        {
            Ok(location) => location,
            Err(source) => {
                return Err(self
                    .version_not_found(uri, params, state, pinned, source)
                    .await);
            }
        };
        // Lance falls back to the legacy manifest name without looking: check it.
        if location.size.is_none() {
            let exists = parts
                .commit_handler
                .version_exists(
                    &parts.base,
                    version,
                    parts.store.inner.as_ref(),
                    location.naming_scheme,
                )
                .await
                .map_err(|e| Error::lance("opening", uri, e))?;
            if !exists {
                let source = lance::Error::not_found(location.path.to_string());
                return Err(self
                    .version_not_found(uri, params, state, pinned, source)
                    .await);
            }
        }
        let key = LoadKey::Pinned {
            version,
            e_tag: location.e_tag.clone(),
        };
        let loaded = self
            .single_flight(state, key, || async {
                self.counters.loads.fetch_add(1, Ordering::Relaxed);
                let builder = DatasetBuilder::from_uri(uri)
                    .with_session(Arc::clone(&self.session))
                    .with_store_params(params.clone())
                    .with_version(version);
                no_panic(&format!("{uri} ({pinned})"), builder.load())
                    .await
                    .map(Arc::new)
            })
            .await;
        match loaded {
            Ok(dataset) => Ok(dataset),
            Err(e @ (lance::Error::NotFound { .. } | lance::Error::DatasetNotFound { .. })) => {
                Err(self.version_not_found(uri, params, state, pinned, e).await)
            }
            Err(e) => Err(Error::lance("opening", uri, e)),
        }
    }

    /// The error for a pinned version or tag that does not exist, naming the
    /// latest version when it can be read (a missing dataset otherwise).
    async fn version_not_found(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        state: &TableState,
        pinned: &VersionSpec,
        source: lance::Error,
    ) -> Error {
        match self.open_latest(uri, params, state).await {
            Ok(latest) => Error::VersionNotFound {
                uri: redact_uri(uri),
                what: pinned.to_string(),
                latest: latest.version_id(),
                source,
            },
            Err(e) => e,
        }
    }

    /// The object store, base path and commit handler of a table (built once).
    async fn store_parts<'a>(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        state: &'a TableState,
    ) -> Result<&'a StoreParts> {
        state
            .store
            .get_or_try_init(|| async {
                let (store, base, commit_handler) = DatasetBuilder::from_uri(uri)
                    .with_session(Arc::clone(&self.session))
                    .with_store_params(params.clone())
                    .build_object_store()
                    .await?;
                Ok::<_, lance::Error>(StoreParts {
                    store,
                    base,
                    commit_handler,
                })
            })
            .await
            .map_err(|e| Error::lance("opening", uri, e))
    }

    async fn open_latest(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        state: &TableState,
    ) -> Result<Arc<Dataset>> {
        let parts = self.store_parts(uri, params, state).await?;
        let location = parts
            .commit_handler
            .resolve_latest_location(&parts.base, &parts.store)
            .await
            .map_err(|e| match e {
                lance::Error::NotFound { .. } => Error::lance(
                    "opening",
                    uri,
                    lance::Error::dataset_not_found(uri.to_string(), Box::new(e)),
                ),
                e => Error::lance("opening", uri, e),
            })?;
        let held = state.head.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(head) = &held
            && same_snapshot(head.manifest_location(), &location)
        {
            self.counters.reused.fetch_add(1, Ordering::Relaxed);
            return Ok(Arc::clone(head));
        }
        let key = LoadKey::Latest {
            version: location.version,
            e_tag: location.e_tag.clone(),
        };
        self.single_flight(state, key, || async {
            // A racing open may have loaded this version and released its
            // slot already: it left the dataset as the head.
            if let Some(head) = state
                .head
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                && same_snapshot(head.manifest_location(), &location)
            {
                return Ok(Arc::clone(head));
            }
            self.counters.loads.fetch_add(1, Ordering::Relaxed);
            let manifest = location.path.to_string();
            let ds = Arc::new(
                no_panic(
                    &manifest,
                    DatasetBuilder::load_by_uri(
                        Arc::clone(&self.session),
                        None,
                        None,
                        uri.to_string(),
                        Some(location.version),
                        Arc::clone(&parts.store),
                        parts.base.clone(),
                        Arc::clone(&parts.commit_handler),
                        Some(params.clone()),
                        None,
                    ),
                )
                .await?,
            );
            let mut head = state.head.lock().unwrap_or_else(|e| e.into_inner());
            if head
                .as_ref()
                .is_none_or(|h| h.version_id() <= ds.version_id())
            {
                *head = Some(Arc::clone(&ds));
            }
            Ok(ds)
        })
        .await
        .map_err(|e| Error::lance("opening", uri, e))
    }

    /// Runs `load` once for concurrent callers with the same key.
    async fn single_flight<F, Fut>(
        &self,
        state: &TableState,
        key: LoadKey,
        load: F,
    ) -> lance::Result<Arc<Dataset>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = lance::Result<Arc<Dataset>>>,
    {
        let cell = {
            let mut loads = state.loads.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(loads.entry(key.clone()).or_default())
        };
        let mut loaded_here = false;
        let result = cell
            .get_or_try_init(|| async {
                loaded_here = true;
                load().await
            })
            .await
            .cloned();
        if !loaded_here && result.is_ok() {
            self.counters.joined.fetch_add(1, Ordering::Relaxed);
        }
        if loaded_here {
            // Latest-version loads are only needed while racing; pinned ones
            // are kept so re-registering a pinned table costs nothing — but
            // only when the manifest has an e_tag telling this file from a
            // later one with the same version number (a dataset deleted and
            // created again at the same location).
            let keep = matches!(key, LoadKey::Pinned { e_tag: Some(_), .. });
            if !keep || result.is_err() {
                let mut loads = state.loads.lock().unwrap_or_else(|e| e.into_inner());
                if loads.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                    loads.remove(&key);
                }
            }
        }
        result
    }
}

/// Runs a Lance load, turning a panic (Lance 14 panics on some corrupt
/// manifests) into an error naming what was being read.
async fn no_panic<T>(what: &str, load: impl Future<Output = lance::Result<T>>) -> lance::Result<T> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(load).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(lance::Error::corrupt_file(
                Path::from(what),
                format!("could not read the manifest (Lance failed: {message})"),
            ))
        }
    }
}

fn pin(builder: DatasetBuilder, version: &VersionSpec) -> DatasetBuilder {
    match version {
        VersionSpec::Latest => builder,
        VersionSpec::Version(v) => builder.with_version(*v),
        VersionSpec::Tag(t) => builder.with_tag(t),
    }
}

/// True when two e_tags name the same object (a missing one matches any:
/// not every store reports them).
fn e_tags_match(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => bare_etag(a) == bare_etag(b),
        _ => true,
    }
}

fn bare_etag(e_tag: &str) -> &str {
    e_tag.trim_start_matches("W/").trim_matches('"')
}

fn same_snapshot(held: &ManifestLocation, latest: &ManifestLocation) -> bool {
    held.version == latest.version
        && held.naming_scheme == latest.naming_scheme
        && match (&held.e_tag, &latest.e_tag) {
            // Lance reports the same ETag quoted after a HEAD and bare after a LIST.
            (Some(a), Some(b)) => bare_etag(a) == bare_etag(b),
            // Without an e_tag, a size match is the best identity available.
            (None, None) => held.size.is_some() && held.size == latest.size,
            _ => false,
        }
}
