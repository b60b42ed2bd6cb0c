//! Planning hooks this crate installs on a DataFusion session.

pub(crate) mod alter;
pub(crate) mod ann;
pub(crate) mod array_fold;
pub(crate) mod dml;
pub(crate) mod front_door;
pub(crate) mod index;
pub(crate) mod merge;
pub(crate) mod merge_into;
pub(crate) mod prepared;
mod split;
pub use split::split_statements;
pub(crate) mod snapshot;
pub(crate) mod table_functions;
pub(crate) mod time_travel;
pub(crate) mod vector_check;
pub(crate) mod version_clause;

pub(crate) use array_fold::fold_number_arrays;
pub(crate) use dml::LanceDmlRewrite;
pub(crate) use front_door::{Planned, is_query, plan_statement};
pub use front_door::{execute_lance_plan, plan_lance_sql, plan_sql};
pub(crate) use merge::LanceMergePlanner;
pub use snapshot::{LanceQueryPlanner, resolve_lance_tables};
pub(crate) use table_functions::LanceFunctionPlanner;
pub(crate) use vector_check::VectorDimensionCheck;
pub(crate) use version_clause::VersionClauseGuard;
