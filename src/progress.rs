//! Live progress of a statement, for command lines: rows its Lance scans
//! have read, rows and fragments its writers have written (read from the
//! DataFusion metrics of its running plan), and the phase of long
//! maintenance work (index builds, optimize), which Lance reports through no
//! metric and is process-wide.
//!
//! A [`ProgressLine`] shows a [`WatchedPlan`]'s progress on one terminal
//! line, rewritten in place and erased when the statement ends.
//!
//! ```
//! use datafusion_lance::progress::Progress;
//! let done = Progress { rows_read: 1500, ..Default::default() };
//! assert_eq!(done.render(std::time::Duration::from_secs(3)), "3.0 s · 1,500 rows read");
//! ```

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use datafusion::physical_plan::ExecutionPlan;

/// The names of the write metrics progress reads (on every node that writes
/// data files: `LanceWriteExec`, `LanceUpdateExec`, `LanceSink`).
pub(crate) const ROWS_WRITTEN: &str = "rows_written";
pub(crate) const FRAGMENTS_WRITTEN: &str = "fragments_written";

static PHASE: Mutex<Option<String>> = Mutex::new(None);

/// Names the long step running now (`building index 'idx' of t`) until
/// dropped.
pub(crate) struct Phase;

impl Phase {
    pub(crate) fn enter(text: String) -> Self {
        *PHASE.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
        Phase
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        *PHASE.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The plan a statement runs, once it is known: a [`ProgressLine`] reads its
/// metrics.
#[derive(Default)]
pub struct WatchedPlan(Mutex<Option<Arc<dyn ExecutionPlan>>>);

impl WatchedPlan {
    /// Watches `plan` (the statement's physical plan, before it runs).
    pub fn set(&self, plan: Arc<dyn ExecutionPlan>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(plan);
    }

    /// The watched plan's progress now (none before a plan is set), with
    /// the current phase.
    pub fn progress(&self) -> Progress {
        let plan = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut progress = plan.map_or_else(Progress::default, |p| Progress::of_plan(p.as_ref()));
        progress.phase = PHASE.lock().unwrap_or_else(|p| p.into_inner()).clone();
        progress
    }
}

/// What a statement has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Rows its Lance scans returned.
    pub rows_read: u64,
    /// Rows handed to Lance writers (`INSERT`, `COPY`, `CREATE TABLE AS`,
    /// the new rows of `UPDATE`).
    pub rows_written: u64,
    /// Fragments those writers finished.
    pub fragments_written: u64,
    /// The long step running now, if any.
    pub phase: Option<String>,
}

impl Progress {
    /// What `plan` (a running or finished physical plan) has read and
    /// written so far, from its nodes' metrics: `output_rows` of its Lance
    /// scans, `rows_written` and `fragments_written` of its writers. No
    /// phase.
    pub fn of_plan(plan: &dyn ExecutionPlan) -> Self {
        let mut progress = Progress::default();
        add_plan(plan, &mut progress);
        progress
    }

    /// `12.4 s · 1,200,000 rows read · 800,000 rows written · 3 fragments
    /// written · building index 'idx' of t`; counts that are zero are left
    /// out.
    pub fn render(&self, elapsed: Duration) -> String {
        let mut parts = vec![format!("{:.1} s", elapsed.as_secs_f64())];
        for (n, what) in [
            (self.rows_read, "rows read"),
            (self.rows_written, "rows written"),
            (self.fragments_written, "fragments written"),
        ] {
            if n > 0 {
                parts.push(format!("{} {what}", thousands(n)));
            }
        }
        if let Some(phase) = &self.phase {
            parts.push(phase.clone());
        }
        parts.join(" · ")
    }
}

fn add_plan(plan: &dyn ExecutionPlan, progress: &mut Progress) {
    if let Some(metrics) = plan.metrics() {
        let sum = |name| metrics.sum_by_name(name).map_or(0, |v| v.as_usize() as u64);
        if plan.name() == "LanceScanExec" {
            // (`sum_by_name` skips DataFusion's built-in metrics.)
            progress.rows_read += metrics.output_rows().unwrap_or(0) as u64;
        }
        progress.rows_written += sum(ROWS_WRITTEN);
        progress.fragments_written += sum(FRAGMENTS_WRITTEN);
    }
    for child in plan.children() {
        add_plan(child.as_ref(), progress);
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Erases the terminal line and returns to its start.
const CLEAR: &str = "\r\x1b[2K";

/// A live progress line on a terminal: after `delay` (at once when it is
/// zero), the progress of a [`WatchedPlan`] is written every 250 ms over
/// the same line; [`finish`] erases it. It runs only while its statement
/// does.
///
/// The line ticks on a thread of its own, on time: it shows the elapsed time
/// even while every worker of the runtime is busy (a join that reads
/// nothing more for seconds).
///
/// [`finish`]: ProgressLine::finish
pub struct ProgressLine {
    shared: Arc<(Mutex<LineState>, Condvar)>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct LineState {
    out: Box<dyn Write + Send>,
    shown: bool,
    finished: bool,
}

/// How often a shown line is rewritten.
const TICK: Duration = Duration::from_millis(250);

impl ProgressLine {
    /// Starts the line on `out` (normally stderr, when it is a terminal).
    pub fn start(out: Box<dyn Write + Send>, delay: Duration, plan: Arc<WatchedPlan>) -> Self {
        let shared = Arc::new((
            Mutex::new(LineState {
                out,
                shown: false,
                finished: false,
            }),
            Condvar::new(),
        ));
        let started = Instant::now();
        if delay.is_zero() {
            // Shown at once: at least one line, however short the statement.
            let mut state = shared.0.lock().unwrap_or_else(|p| p.into_inner());
            let _ = write!(
                state.out,
                "{CLEAR}{}",
                plan.progress().render(Duration::ZERO)
            );
            let _ = state.out.flush();
            state.shown = true;
        }
        let ticker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("progress-line".into())
                .spawn(move || {
                    let (lock, finished) = &*shared;
                    let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let mut wait = delay;
                    loop {
                        state = finished
                            .wait_timeout_while(state, wait, |s| !s.finished)
                            .unwrap_or_else(|p| p.into_inner())
                            .0;
                        if state.finished {
                            return;
                        }
                        let line = plan.progress().render(started.elapsed());
                        let _ = write!(state.out, "{CLEAR}{line}");
                        let _ = state.out.flush();
                        state.shown = true;
                        wait = TICK;
                    }
                })
                .ok()
        };
        Self { shared, ticker }
    }

    /// Stops the line and erases it (before the statement's output).
    /// Dropping the line does the same (a cancelled statement).
    pub fn finish(self) {}
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        {
            let (lock, finished) = &*self.shared;
            let mut state = lock.lock().unwrap_or_else(|p| p.into_inner());
            state.finished = true;
            if state.shown {
                let _ = write!(state.out, "{CLEAR}");
                let _ = state.out.flush();
                state.shown = false;
            }
            finished.notify_all();
        }
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn renders_counts_and_phase() {
        let p = Progress {
            rows_read: 1_234_567,
            rows_written: 0,
            fragments_written: 12,
            phase: Some("building index 'i' of t".into()),
        };
        assert_eq!(
            p.render(Duration::from_millis(2500)),
            "2.5 s · 1,234,567 rows read · 12 fragments written · building index 'i' of t"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn shows_after_the_delay_and_erases_itself() {
        let out = Captured::default();
        // Finished before the delay: nothing is written.
        let line = ProgressLine::start(
            Box::new(out.clone()),
            Duration::from_secs(3600),
            Arc::default(),
        );
        line.finish();
        assert!(out.0.lock().unwrap().is_empty());

        let phase = Phase::enter("optimizing".into());
        // No delay: the first line is written before `start` returns.
        let line = ProgressLine::start(Box::new(out.clone()), Duration::ZERO, Arc::default());
        drop(phase);
        line.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with(CLEAR), "{text:?}");
        assert!(text.contains(" s · "), "{text:?}");
        assert!(text.contains("optimizing"), "{text:?}");
        assert!(text.ends_with(CLEAR), "{text:?}");
        assert!(!text.contains('\n'), "{text:?}");
    }

    /// The line needs no async runtime: it ticks while the thread that
    /// started it is busy (here, with no runtime at all).
    #[test]
    fn ticks_on_its_own_thread() {
        let out = Captured::default();
        let line = ProgressLine::start(
            Box::new(out.clone()),
            Duration::from_millis(1),
            Arc::default(),
        );
        let renders = || {
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            text.matches(" s").count()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while renders() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(renders() >= 3, "the line did not tick");
        line.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.ends_with(CLEAR), "{text:?}");
    }
}
