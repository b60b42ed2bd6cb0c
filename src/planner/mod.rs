//! Planning hooks this crate installs on a DataFusion session.

pub(crate) mod vector_check;

pub use vector_check::VectorDimensionCheck;
