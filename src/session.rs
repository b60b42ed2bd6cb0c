//! The process-wide Lance session and the dataset opener built on it.
//!
//! A Lance [`Session`] caches manifests, file metadata and indices. Lance
//! creates a fresh one for every `Dataset` opened without one, so a server that
//! opens the same table for many clients would read and cache the same
//! manifest many times. This crate opens every dataset through one
//! [`LanceSessionCache`]: by default a single process-wide instance shared by
//! every `SessionContext`, provider, sink and table function.
//!
//! On top of Lance's caches the opener adds:
//!
//! * **single-flight loads**: concurrent opens of the same `(uri, version)` load
//!   the manifest once; the others wait for it;
//! * **warm opens without manifest reads**: an open of the latest version lists
//!   the version directory (one `LIST`/`readdir`) and reuses the dataset it
//!   already holds when nothing was committed since.
//!
//! A context can use its own session instead ([`LanceSessionCache::new`], set
//! with [`crate::LanceSessionContextExt::with_lance_session_cache`]). The
//! environment variable `DATAFUSION_LANCE_SHARE_SESSION=0` makes every open
//! use a private, throw-away Lance session (Lance's own behaviour) — an escape
//! hatch for A/B measurements, not for production.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use datafusion::execution::config::SessionConfig;
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::session::Session;
use lance_io::object_store::{ObjectStore, ObjectStoreParams, StorageOptionsAccessor};
use lance_table::io::commit::{CommitHandler, ManifestLocation};
use object_store_014::path::Path;
use tokio::sync::OnceCell;

use crate::config::{CacheBudgets, LanceConfig, VersionSpec};
use crate::error::{Error, Result};
use crate::location::{Snapshot, TableLocation, normalize_uri, redact_uri};

/// Environment variable: `0` disables session sharing (every open gets a
/// private Lance session). For A/B measurement only.
pub const SHARE_SESSION_ENV: &str = "DATAFUSION_LANCE_SHARE_SESSION";

static SHARING_DISABLED: LazyLock<bool> = LazyLock::new(|| {
    std::env::var(SHARE_SESSION_ENV)
        .map(|v| matches!(v.trim(), "0" | "false" | "off" | "no"))
        .unwrap_or(false)
});

/// True when `DATAFUSION_LANCE_SHARE_SESSION=0` is set for this process.
pub fn session_sharing_disabled() -> bool {
    *SHARING_DISABLED
}

/// Builds the Lance object-store parameters for a set of storage options.
pub fn store_params(storage_options: &BTreeMap<String, String>) -> ObjectStoreParams {
    if storage_options.is_empty() {
        return ObjectStoreParams::default();
    }
    let options: HashMap<String, String> = storage_options.clone().into_iter().collect();
    ObjectStoreParams {
        storage_options_accessor: Some(Arc::new(StorageOptionsAccessor::with_static_options(
            options,
        ))),
        ..Default::default()
    }
}

#[derive(Default)]
struct Counters {
    opens: AtomicU64,
    reused: AtomicU64,
    loads: AtomicU64,
    joined: AtomicU64,
}

/// Counters of the crate's dataset opener (in addition to Lance's caches).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenerStats {
    /// Dataset opens requested.
    pub opens: u64,
    /// Opens of the latest version answered by the dataset already held (no
    /// manifest lookup at all).
    pub reused: u64,
    /// Manifest loads performed (each either a Lance cache hit or a read).
    pub loads: u64,
    /// Opens that waited for a concurrent load of the same version instead of
    /// loading it themselves.
    pub joined: u64,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct TableKey {
    uri: String,
    params: ObjectStoreParams,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum LoadKey {
    Latest { version: u64, e_tag: Option<String> },
    Pinned { version: u64, e_tag: Option<String> },
}

struct StoreParts {
    store: Arc<ObjectStore>,
    base: Path,
    commit_handler: Arc<dyn CommitHandler>,
}

#[derive(Default)]
struct TableState {
    store: OnceCell<StoreParts>,
    head: Mutex<Option<Arc<Dataset>>>,
    loads: Mutex<HashMap<LoadKey, Arc<OnceCell<Arc<Dataset>>>>>,
}

/// How a context picks its Lance session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One of the crate-managed, process-wide sessions (chosen by budgets).
    Shared,
    /// A session given by the caller; budget settings do not apply.
    Injected,
}

/// A Lance [`Session`] plus the dataset opener that uses it.
///
/// Attach one to a DataFusion `SessionConfig` as an extension (done by
/// [`crate::register_lance`]); every dataset this crate opens for that
/// context goes through it.
pub struct LanceSessionCache {
    session: Arc<Session>,
    kind: Kind,
    budgets: Option<CacheBudgets>,
    tables: Mutex<HashMap<TableKey, Arc<TableState>>>,
    /// Store parameters given explicitly for a location (object-store
    /// wrappers, for instance), found again by plan nodes that carry only
    /// the location.
    params: Mutex<HashMap<TableLocation, ObjectStoreParams>>,
    counters: Counters,
}

impl fmt::Debug for LanceSessionCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceSessionCache")
            .field("kind", &self.kind)
            .field("budgets", &self.budgets)
            .finish_non_exhaustive()
    }
}

static SHARED: LazyLock<Mutex<HashMap<CacheBudgets, Arc<LanceSessionCache>>>> =
    LazyLock::new(Default::default);

impl LanceSessionCache {
    fn build(session: Arc<Session>, kind: Kind, budgets: Option<CacheBudgets>) -> Self {
        Self {
            session,
            kind,
            budgets,
            tables: Mutex::new(HashMap::new()),
            params: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }
    }

    /// The cache a running task uses (the one its session set up; see
    /// [`Self::for_config`]).
    pub fn for_task(context: &datafusion::execution::TaskContext) -> Arc<Self> {
        Self::for_config(context.session_config())
    }

    /// Remembers explicit store parameters for `location`, so that plan
    /// nodes of this process that carry only the location open it the same
    /// way.
    pub(crate) fn register_params(&self, location: &TableLocation, params: &ObjectStoreParams) {
        self.params
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(location.clone(), params.clone());
    }

    /// The store parameters to open `location` with: those registered for it
    /// in this process, else the ones its storage options give.
    pub fn params_for(&self, location: &TableLocation) -> ObjectStoreParams {
        self.params
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(location)
            .cloned()
            .unwrap_or_else(|| store_params(&location.storage_options))
    }

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

    /// The process-wide shared session with the default budgets.
    pub fn shared() -> Arc<Self> {
        Self::shared_with_budgets(CacheBudgets::from_env())
    }

    /// The process-wide shared session with the given budgets (created on first use).
    pub fn shared_with_budgets(budgets: CacheBudgets) -> Arc<Self> {
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(shared.entry(budgets).or_insert_with(|| {
            let session = Session::new(
                budgets.index_bytes,
                budgets.metadata_bytes,
                Default::default(),
            );
            Arc::new(Self::build(Arc::new(session), Kind::Shared, Some(budgets)))
        }))
    }

    /// Wraps a caller-provided Lance session (not shared with other contexts
    /// unless the caller shares it). `lance.*_cache_bytes` settings do not
    /// apply to it.
    pub fn new(session: Arc<Session>) -> Arc<Self> {
        Arc::new(Self::build(session, Kind::Injected, None))
    }

    /// A fresh private session with the given budgets.
    pub fn private(budgets: CacheBudgets) -> Arc<Self> {
        let session = Session::new(
            budgets.index_bytes,
            budgets.metadata_bytes,
            Default::default(),
        );
        Arc::new(Self::build(
            Arc::new(session),
            Kind::Injected,
            Some(budgets),
        ))
    }

    /// The cache a DataFusion session uses: its `LanceSessionCache` extension
    /// (switching shared sessions when `lance.*_cache_bytes` select other
    /// budgets), or the default shared session when none is attached.
    pub fn for_config(config: &SessionConfig) -> Arc<Self> {
        let settings = LanceConfig::from_options(config.options());
        let attached = config.get_extension::<LanceSessionCache>();
        match attached {
            Some(cache) if cache.kind == Kind::Injected => cache,
            Some(cache) if cache.budgets == Some(settings.cache_budgets()) => cache,
            _ => Self::shared_with_budgets(settings.cache_budgets()),
        }
    }

    /// The Lance session.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The cache budgets, when this cache created its session.
    pub fn budgets(&self) -> Option<CacheBudgets> {
        self.budgets
    }

    /// True for the crate-managed process-wide sessions.
    pub fn is_shared(&self) -> bool {
        self.kind == Kind::Shared
    }

    /// Counters of the opener.
    pub fn opener_stats(&self) -> OpenerStats {
        OpenerStats {
            opens: self.counters.opens.load(Ordering::Relaxed),
            reused: self.counters.reused.load(Ordering::Relaxed),
            loads: self.counters.loads.load(Ordering::Relaxed),
            joined: self.counters.joined.load(Ordering::Relaxed),
        }
    }

    /// Forgets the datasets held for `uri` (all store parameters), for
    /// example after the dataset was deleted and recreated elsewhere.
    pub fn forget(&self, uri: &str) {
        if let Ok(uri) = normalize_uri(uri) {
            self.tables
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k, _| k.uri != uri);
        }
    }

    /// Records a version this process just committed, so the next open of the
    /// latest version reuses it (Lance has already cached its manifest).
    pub(crate) fn note_committed(
        &self,
        uri: &str,
        params: &ObjectStoreParams,
        dataset: Arc<Dataset>,
    ) {
        if session_sharing_disabled() {
            return;
        }
        let state = self.table_state(TableKey {
            uri: uri.to_string(),
            params: params.clone(),
        });
        let mut head = state.head.lock().unwrap_or_else(|e| e.into_inner());
        if head
            .as_ref()
            .is_none_or(|h| h.version_id() < dataset.version_id())
        {
            *head = Some(dataset);
        }
    }

    fn table_state(&self, key: TableKey) -> Arc<TableState> {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(tables.entry(key).or_default())
    }

    /// Opens `uri` at `version` through this cache.
    ///
    /// `uri` must already be normalised ([`normalize_uri`]).
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
                    return Err(Error::unsupported(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_sessions_are_keyed_by_budgets() {
        let a = LanceSessionCache::shared();
        let b = LanceSessionCache::shared();
        assert!(Arc::ptr_eq(&a, &b));
        let small = CacheBudgets {
            metadata_bytes: 1 << 20,
            index_bytes: 1 << 20,
        };
        let c = LanceSessionCache::shared_with_budgets(small);
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(Arc::ptr_eq(
            &c,
            &LanceSessionCache::shared_with_budgets(small)
        ));
    }
}
