//! Waiting for I/O where DataFusion asks synchronously: a table function's
//! schema (`TableFunctionImpl::call_with_args`) and a scalar function's
//! value are computed without `async`, inside the caller's runtime.
//!
//! [`wait_for`] runs the work on one small runtime this process keeps for
//! it (so connections it opens outlive the call), and blocks the calling
//! thread until it ends. It never runs the work on the caller's runtime,
//! so it works on current-thread runtimes too.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{Error, Result};

fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("datafusion-lance-lookup")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::invalid_input(format!("cannot start the lookup runtime: {e}")))
}

/// Runs `work` to its end and returns its output, from synchronous code.
pub(crate) fn wait_for<T: Send + 'static>(
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    let (done, result) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = done.send(work.await);
    });
    result
        .recv()
        .map_err(|_| Error::invalid_input("a lookup stopped before it answered"))?
}
