//! Fault injection through Lance's object-store wrapping hook.
//!
//! [`FaultInjector`] wraps every object store a dataset opens; rules fail or
//! delay chosen operations on paths matching a pattern, after a number of
//! successful calls, and every call is recorded.

use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::prelude::SessionContext;
use datafusion_lance::LanceTableProvider;
use std::sync::{Arc, Mutex};

use lance_core::utils::testing::{ProxyObjectStore, ProxyObjectStorePolicy};
use lance_io::object_store::{ObjectStoreParams, WrappingObjectStore};
use object_store_014::ObjectStore;
use object_store_014::list::PaginatedListStore;

/// One injected fault: `operation` ("put", "put_multipart", "get_opts",
/// "get_ranges", "list", "rename", "copy") on a path containing `pattern`
/// fails once `skip` matching calls have succeeded, at most `times` times.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub(crate) operation: &'static str,
    pub(crate) pattern: &'static str,
    pub(crate) skip: usize,
    pub(crate) times: usize,
    /// Calls counted with other faults sharing it (for `skip`), if any.
    pub(crate) shared: Option<Arc<AtomicUsize>>,
}

impl Fault {
    /// Fails every matching call from the first one on.
    pub(crate) fn always(operation: &'static str, pattern: &'static str) -> Self {
        Self {
            operation,
            pattern,
            skip: 0,
            times: usize::MAX,
            shared: None,
        }
    }
}

/// Something to do before a chosen call (see [`FaultInjector::before_call`]).
struct Hook {
    operation: &'static str,
    pattern: &'static str,
    /// Runs before the `nth` matching call (1-based), every `every` calls
    /// after that when set, while `remaining` runs are left.
    nth: usize,
    every: Option<usize>,
    remaining: usize,
    seen: usize,
    action: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("operation", &self.operation)
            .field("pattern", &self.pattern)
            .field("nth", &self.nth)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    faults: Vec<(Fault, usize, usize)>, // fault, matching calls seen, failures injected
    hooks: Vec<Hook>,
    /// Delay (ms) for operations on paths containing a pattern.
    delays: Vec<(&'static str, &'static str, u64)>,
    /// Every call: (operation, path).
    calls: Vec<(String, String)>,
}

/// Shared by the test and every store the wrapper produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultInjector {
    state: Arc<Mutex<State>>,
    calls: Arc<AtomicUsize>,
    hooks_run: Arc<AtomicUsize>,
}

impl FaultInjector {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a fault.
    pub(crate) fn fail(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push((fault, 0, 0));
    }

    /// Fails every call matching any of `rules` once `skip` calls matching
    /// any of them have succeeded (e.g. "after two files were written").
    pub(crate) fn fail_after(&self, rules: &[(&'static str, &'static str)], skip: usize) {
        let shared = Arc::new(AtomicUsize::new(0));
        for &(operation, pattern) in rules {
            self.fail(Fault {
                operation,
                pattern,
                skip,
                times: usize::MAX,
                shared: Some(Arc::clone(&shared)),
            });
        }
    }

    /// Removes every fault.
    pub(crate) fn clear(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// Delays `operation` on paths containing `pattern` by `millis` (blocking
    /// the calling thread: keep it short).
    pub(crate) fn delay(&self, operation: &'static str, pattern: &'static str, millis: u64) {
        self.state
            .lock()
            .unwrap()
            .delays
            .push((operation, pattern, millis));
    }

    /// Runs `action` (blocking the calling thread) before the `nth` call
    /// (1-based) of `operation` on a path containing `pattern`, then before
    /// every `every`-th matching call after it, `times` times in all. The
    /// call proceeds once `action` returns: a hook interleaves another
    /// writer's commit with this process's statements deterministically.
    pub(crate) fn before_call(
        &self,
        operation: &'static str,
        pattern: &'static str,
        nth: usize,
        every: Option<usize>,
        times: usize,
        action: impl Fn() + Send + Sync + 'static,
    ) {
        self.state.lock().unwrap().hooks.push(Hook {
            operation,
            pattern,
            nth,
            every,
            remaining: times,
            seen: 0,
            action: Arc::new(action),
        });
    }

    /// How many times hooks ran.
    pub(crate) fn hooks_run(&self) -> usize {
        self.hooks_run.load(Ordering::SeqCst)
    }

    /// The calls recorded so far whose path contains `pattern`.
    pub(crate) fn calls(&self, pattern: &str) -> Vec<(String, String)> {
        self.state
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(_, p)| p.contains(pattern))
            .cloned()
            .collect()
    }

    /// Faults injected so far.
    pub(crate) fn injected(&self) -> usize {
        self.state.lock().unwrap().faults.iter().map(|f| f.2).sum()
    }

    /// Store parameters that route every store through this injector.
    pub(crate) fn params(&self) -> ObjectStoreParams {
        ObjectStoreParams {
            object_store_wrapper: Some(Arc::new(self.clone())),
            ..Default::default()
        }
    }

    fn policy(&self) -> Arc<Mutex<ProxyObjectStorePolicy>> {
        let mut policy = ProxyObjectStorePolicy::new();
        let state = Arc::clone(&self.state);
        let state_for_delay = Arc::clone(&self.state);
        let calls = Arc::clone(&self.calls);
        let hooks_run = Arc::clone(&self.hooks_run);
        policy.set_before_policy(
            "faults",
            Arc::new(
                move |operation: &str, path: &object_store_014::path::Path| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    let mut state = state.lock().unwrap();
                    state.calls.push((operation.to_string(), path.to_string()));
                    let mut due = Vec::new();
                    for hook in state.hooks.iter_mut() {
                        if hook.operation != operation || !path.as_ref().contains(hook.pattern) {
                            continue;
                        }
                        hook.seen += 1;
                        let at = hook.seen >= hook.nth
                            && match hook.every {
                                None => hook.seen == hook.nth,
                                Some(k) => (hook.seen - hook.nth) % k.max(1) == 0,
                            };
                        if at && hook.remaining > 0 {
                            hook.remaining -= 1;
                            due.push(Arc::clone(&hook.action));
                        }
                    }
                    if !due.is_empty() {
                        // Run outside the lock: the action may use stores of this injector.
                        drop(state);
                        for action in due {
                            action();
                            hooks_run.fetch_add(1, Ordering::SeqCst);
                        }
                        state = state_for_delay.lock().unwrap();
                    }
                    let delay: u64 = state
                        .delays
                        .iter()
                        .filter(|(op, pattern, _)| {
                            *op == operation && path.as_ref().contains(pattern)
                        })
                        .map(|(_, _, ms)| ms)
                        .sum();
                    if delay > 0 {
                        drop(state);
                        std::thread::sleep(std::time::Duration::from_millis(delay));
                        state = state_for_delay.lock().unwrap();
                    }
                    for (fault, seen, injected) in state.faults.iter_mut() {
                        if fault.operation == operation && path.as_ref().contains(fault.pattern) {
                            *seen += 1;
                            let calls = match &fault.shared {
                                Some(shared) => shared.fetch_add(1, Ordering::SeqCst) + 1,
                                None => *seen,
                            };
                            if calls > fault.skip && *injected < fault.times {
                                *injected += 1;
                                return Err(lance_core::Error::io(format!(
                                    "injected fault: {operation} {path}"
                                )));
                            }
                        }
                    }
                    Ok(())
                },
            ),
        );
        Arc::new(Mutex::new(policy))
    }
}

impl WrappingObjectStore for FaultInjector {
    fn wrap(&self, _store_prefix: &str, original: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(ProxyObjectStore::new(original, self.policy()))
    }

    fn wrap_paginated(
        &self,
        _store_prefix: &str,
        _original: Arc<dyn PaginatedListStore>,
    ) -> Option<Arc<dyn PaginatedListStore>> {
        // Listings go through `wrap`, so faults apply to them too.
        None
    }
}

/// A table `t (id, v, tag)` with ids 0..100 (primary key `id`) in five
/// fragments at `uri`, registered in `ctx` and, through `faults`, as `ft`.
pub(crate) async fn faulty_table(ctx: &SessionContext, uri: &str, faults: &FaultInjector) {
    crate::support::ok(
        ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR, PRIMARY KEY (id)) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    crate::support::ok(ctx, "SET lance.max_rows_per_file = 20").await;
    crate::support::ok(
        ctx,
        "INSERT INTO t SELECT value, value * 2, 'seed' FROM generate_series(0, 99)",
    )
    .await;
    crate::support::ok(ctx, "SET lance.max_rows_per_file = 1048576").await;
    let provider = LanceTableProvider::builder(uri)
        .with_name("ft")
        .with_store_params(faults.params())
        .build()
        .await
        .unwrap();
    ctx.register_table("ft", Arc::new(provider)).unwrap();
}

/// Stores for `faulty://<bucket>/<path>` URLs: the process's shared
/// in-memory buckets (`shared-memory://<bucket>/<path>` reads the same
/// objects) with every call routed through an injector. For statements that
/// open their store by URL, such as `COPY ... TO '<url>' STORED AS LANCE`.
#[derive(Debug)]
struct FaultyStores {
    injector: FaultInjector,
}

impl FaultInjector {
    /// Makes `faulty://` URLs opened through `session` go through this injector.
    pub(crate) fn register_scheme(&self, session: &lance::session::Session) {
        session.store_registry().insert(
            "faulty",
            Arc::new(FaultyStores {
                injector: self.clone(),
            }),
        );
    }
}

#[async_trait::async_trait]
impl lance_io::object_store::ObjectStoreProvider for FaultyStores {
    async fn new_store(
        &self,
        base_path: url::Url,
        params: &ObjectStoreParams,
    ) -> lance_core::Result<lance_io::object_store::ObjectStore> {
        use lance_io::object_store::providers::shared_memory::SharedMemoryStoreProvider;
        let shared = url::Url::parse(&base_path.as_str().replacen(
            "faulty://",
            "shared-memory://",
            1,
        ))
        .map_err(|e| lance_core::Error::invalid_input(e.to_string()))?;
        let mut store = SharedMemoryStoreProvider::default()
            .new_store(shared, params)
            .await?;
        store.inner = self.injector.wrap("", Arc::clone(&store.inner));
        Ok(store)
    }

    fn extract_path(&self, url: &url::Url) -> lance_core::Result<object_store_014::path::Path> {
        Ok(object_store_014::path::Path::from(
            url.path().trim_start_matches('/'),
        ))
    }

    fn calculate_object_store_prefix(
        &self,
        url: &url::Url,
        _storage_options: Option<&std::collections::HashMap<String, String>>,
    ) -> lance_core::Result<String> {
        Ok(format!("faulty${}", url.authority()))
    }
}
