//! Maintenance: the one `MaintenanceExec<M>` that vacuum, tag, optimize and
//! index changes are, and each of them.

pub(crate) mod maintenance;
pub(crate) mod optimize;
pub(crate) mod tag;
pub(crate) mod vacuum;
