//! Reading: the scan node and what Lance's own plan did inside it.

pub(crate) mod cloud_scan;
pub(crate) mod scan;
pub(crate) mod scan_metrics;
