//! Ctrl-C: SIGINT, caught on a thread of its own.
//!
//! The signal is received outside the runtime that runs statements, so it
//! is seen however busy that runtime's workers are. A statement waits for
//! [`Interrupts::next`] beside its own work (see `statements.rs`); at the
//! REPL's prompt the terminal is in raw mode and Ctrl-C is a key that the
//! line editor reports instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

/// The SIGINTs this process received.
#[derive(Debug, Default)]
pub(crate) struct Interrupts {
    received: AtomicU64,
    notify: Notify,
}

impl Interrupts {
    /// Catches SIGINT from now on (instead of the default: exit).
    pub(crate) fn install() -> std::io::Result<Arc<Self>> {
        let interrupts = Arc::new(Self::default());
        let seen = Arc::clone(&interrupts);
        let (registered, wait) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sigint".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => return registered.send(Err(e)).unwrap_or_default(),
                };
                runtime.block_on(async move {
                    let mut signals = match signal(SignalKind::interrupt()) {
                        Ok(signals) => signals,
                        Err(e) => return registered.send(Err(e)).unwrap_or_default(),
                    };
                    registered.send(Ok(())).unwrap_or_default();
                    while signals.recv().await.is_some() {
                        seen.received.fetch_add(1, Ordering::SeqCst);
                        seen.notify.notify_waiters();
                    }
                })
            })?;
        // Registered before this returns: a Ctrl-C from now on is ours.
        wait.recv().map_err(std::io::Error::other)??;
        Ok(interrupts)
    }

    /// Resolves at the first SIGINT after this call.
    pub(crate) fn next(self: &Arc<Self>) -> impl Future<Output = ()> + use<> {
        let before = self.received.load(Ordering::SeqCst);
        let this = Arc::clone(self);
        async move {
            loop {
                let notified = this.notify.notified();
                if this.received.load(Ordering::SeqCst) > before {
                    return;
                }
                notified.await;
            }
        }
    }
}
