//! Fault injection through Lance's object-store wrapping hook.
//!
//! [`FaultInjector`] wraps every object store a dataset opens; rules fail or
//! delay chosen operations on paths matching a pattern, after a number of
//! successful calls, and every call is recorded.

use std::sync::atomic::{AtomicUsize, Ordering};
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
}

impl Fault {
    /// Fails every matching call from the first one on.
    pub(crate) fn always(operation: &'static str, pattern: &'static str) -> Self {
        Self {
            operation,
            pattern,
            skip: 0,
            times: usize::MAX,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    faults: Vec<(Fault, usize, usize)>, // fault, matching calls seen, failures injected
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
}

impl FaultInjector {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a fault.
    pub(crate) fn fail(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push((fault, 0, 0));
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
        policy.set_before_policy(
            "faults",
            Arc::new(
                move |operation: &str, path: &object_store_014::path::Path| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    let mut state = state.lock().unwrap();
                    state.calls.push((operation.to_string(), path.to_string()));
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
                            if *seen > fault.skip && *injected < fault.times {
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
