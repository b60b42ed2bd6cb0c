//! Planning hooks this crate installs on a DataFusion session.

pub(crate) mod dml;
pub(crate) mod merge;
pub mod merge_into;
pub(crate) mod snapshot;
pub(crate) mod vector_check;
pub(crate) mod version_clause;

pub use dml::LanceDmlRewrite;
pub use merge::LanceMergePlanner;
pub use snapshot::{LanceQueryPlanner, resolve_lance_tables};
pub use vector_check::VectorDimensionCheck;
pub use version_clause::VersionClauseGuard;
