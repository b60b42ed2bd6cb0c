//! Planning hooks this crate installs on a DataFusion session.

pub(crate) mod dml;
pub(crate) mod merge;
pub mod merge_into;
pub(crate) mod vector_check;

pub use dml::LanceDmlRewrite;
pub use merge::LanceMergePlanner;
pub use vector_check::VectorDimensionCheck;
