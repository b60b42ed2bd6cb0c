//! Peak heap of a run: the bench's allocator is the system allocator with a
//! count of live bytes that is switched on only while a memory pass runs
//! (otherwise one relaxed load per call: timings are not affected).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

use crate::common::Side;

/// The system allocator, counting while [`ON`].
pub(crate) struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes as i64, Relaxed) + bytes as i64;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only
// observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && ON.load(Relaxed) {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && ON.load(Relaxed) {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ON.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as i64, Relaxed);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && ON.load(Relaxed) {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub((layout.size() - new_size) as i64, Relaxed);
            }
        }
        p
    }
}

/// Median, min and max of a side's peak heap growth over its runs, in bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peak {
    pub(crate) median: u64,
    pub(crate) min: u64,
    pub(crate) max: u64,
}

impl Peak {
    /// `12.3 MB (12.1–12.9)`
    pub(crate) fn cell(&self) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        format!(
            "{:.1} MB ({:.1}–{:.1})",
            mb(self.median),
            mb(self.min),
            mb(self.max)
        )
    }
}

/// `iters` rounds in which each side runs once, in turn, with the count on:
/// each side's peak of live heap bytes above where its run started.
pub(crate) async fn interleaved_peaks(iters: usize, sides: &mut [Side<'_>]) -> Vec<Peak> {
    let mut peaks = vec![Vec::with_capacity(iters); sides.len()];
    for _ in 0..iters.max(1) {
        for (i, side) in sides.iter_mut().enumerate() {
            let run = side().await;
            LIVE.store(0, Relaxed);
            PEAK.store(0, Relaxed);
            ON.store(true, Relaxed);
            run.await;
            ON.store(false, Relaxed);
            peaks[i].push(PEAK.load(Relaxed).max(0) as u64);
        }
    }
    peaks
        .into_iter()
        .map(|mut p| {
            p.sort_unstable();
            Peak {
                median: p[p.len() / 2],
                min: p[0],
                max: p[p.len() - 1],
            }
        })
        .collect()
}
