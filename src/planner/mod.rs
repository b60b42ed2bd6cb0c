//! Planning hooks this crate installs on a DataFusion session.

pub(crate) mod dml;
pub(crate) mod vector_check;

pub use dml::LanceDmlRewrite;
pub use vector_check::VectorDimensionCheck;
