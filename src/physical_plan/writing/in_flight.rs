//! The statements of this process that are writing files no version
//! references yet: `lance_vacuum` keeps their files.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use chrono::{DateTime, Utc};

use crate::physical_plan::target::WriteTarget;

/// Statements of this process that are writing files no version references
/// yet, by table location: `lance_vacuum` never removes files newer than the
/// oldest of them.
static IN_FLIGHT: LazyLock<Mutex<Vec<InFlightWrite>>> = LazyLock::new(Default::default);
static NEXT_WRITE: AtomicU64 = AtomicU64::new(0);

/// (registration id, table location, start time).
type InFlightWrite = (u64, String, DateTime<Utc>);

/// Registration of an executing write; removed when dropped.
#[derive(Debug)]
pub(crate) struct InFlight(u64);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut writes = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        writes.retain(|(id, _, _)| *id != self.0);
    }
}

/// The location a table's files live under, as the registry keys it.
fn location_key(uri: &str) -> String {
    uri.trim_end_matches('/')
        .trim_start_matches("file://")
        .to_string()
}

impl WriteTarget {
    /// Registers the statement as writing to this table until the guard drops.
    pub(crate) fn in_flight(&self) -> InFlight {
        let id = NEXT_WRITE.fetch_add(1, Ordering::Relaxed);
        let mut writes = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        writes.push((id, location_key(&self.location.uri), Utc::now()));
        InFlight(id)
    }
}

/// When the oldest write of this process to `uri` still executing started.
pub(crate) fn oldest_in_flight(uri: &str) -> Option<DateTime<Utc>> {
    let key = location_key(uri);
    let writes = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    writes
        .iter()
        .filter(|(_, u, _)| *u == key)
        .map(|(_, _, started)| *started)
        .min()
}
