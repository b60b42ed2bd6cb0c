//! Physical plan nodes. One node per file.

pub mod scan;

pub use scan::LanceScanExec;
