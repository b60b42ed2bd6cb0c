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
//!   already holds when nothing was committed since;
//! * **small local reads in place** (Unix): the sessions it creates read
//!   local files of at most 64 KiB on the asking task instead of Tokio's
//!   blocking pool (`local_files`).
//!
//! A context can use its own session instead ([`LanceSessionCache::new`], set
//! with [`crate::LanceSessionContextExt::with_lance_session_cache`]). The
//! environment variable `DATAFUSION_LANCE_SHARE_SESSION=0` makes every open
//! use a private, throw-away Lance session (Lance's own behaviour) — an escape
//! hatch for A/B measurements, not for production.

#[cfg(unix)]
pub(crate) mod blocking;
pub(crate) mod catalog_tables;
mod local_files;
mod open;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use datafusion::execution::config::SessionConfig;
use lance::Dataset;
use lance::session::Session;
use lance_io::object_store::{ObjectStore, ObjectStoreParams, StorageOptionsAccessor};
use lance_table::io::commit::CommitHandler;
use object_store_014::path::Path;
use tokio::sync::OnceCell;

use crate::config::{CacheBudgets, LanceConfig};
use crate::location::{TableLocation, normalize_uri};

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

/// The object-store registry of the sessions this crate creates: Lance's,
/// with small local reads in place on Unix (`local_files`).
fn store_registry() -> Arc<lance_io::object_store::ObjectStoreRegistry> {
    #[cfg(unix)]
    return local_files::store_registry();
    #[cfg(not(unix))]
    return Default::default();
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
                store_registry(),
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
            store_registry(),
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

    /// The opener counters of every process-wide shared session, summed
    /// (caches made with [`Self::new`] or [`Self::private`] are not counted).
    pub fn process_stats() -> OpenerStats {
        let shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        shared
            .values()
            .map(|cache| cache.opener_stats())
            .fold(OpenerStats::default(), |a, b| OpenerStats {
                opens: a.opens + b.opens,
                reused: a.reused + b.reused,
                loads: a.loads + b.loads,
                joined: a.joined + b.joined,
            })
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
