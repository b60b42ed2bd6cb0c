//! The library's Tokio runtime, and waiting on it from Python: the GIL
//! released, a pending signal (Ctrl-C) cancelling the wait.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::{Builder, Runtime};

/// This library's runtime: its tasks, and those Lance spawns, run here
/// (DataFusion's Python bindings have a runtime of their own).
pub(crate) static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    Builder::new_multi_thread()
        .enable_all()
        .thread_name("datafusion-lance")
        .build()
        .expect("the datafusion-lance runtime starts")
});

/// How often a wait looks for a pending signal.
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// Runs `work` to its end on [`RUNTIME`] with the GIL released. A signal
/// raised meanwhile (Ctrl-C: `KeyboardInterrupt`) drops `work`, which
/// cancels the statement, and is raised.
pub(crate) fn wait<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    py.detach(|| {
        RUNTIME.block_on(async move {
            tokio::pin!(work);
            let mut ticks = tokio::time::interval(SIGNAL_CHECK);
            loop {
                tokio::select! {
                    done = &mut work => return Ok(done),
                    _ = ticks.tick() => Python::attach(|py| py.check_signals())?,
                }
            }
        })
    })
}

/// `future`, each poll of it inside [`RUNTIME`]'s context (its timers, I/O
/// and `tokio::spawn`), whichever thread polls it: DataFusion's FFI polls a
/// provider's `scan`, `insert_into` and a schema's `table` on the caller's
/// runtime, which is another library's (its Tokio is not this one's).
pub(crate) fn in_runtime<F: Future>(future: F) -> impl Future<Output = F::Output> {
    let mut future = Box::pin(future);
    std::future::poll_fn(move |cx| {
        let _entered = RUNTIME.enter();
        future.as_mut().poll(cx)
    })
}
