//! Physical plan nodes. One node per file.
//!
//! Writes have a two-phase shape: [`LanceWriteExec`] writes uncommitted
//! fragments in every input partition and emits their metadata as rows;
//! [`LanceCommitExec`] (one partition) commits all of them in one transaction.
//! No in-process state connects the two, so the plan can be distributed.

pub mod commit;
pub mod delete;
pub(crate) mod in_flight;
pub mod merge;
pub mod merge_options;
pub(crate) mod rows;
pub mod scan;
pub mod sink;
pub mod target;
pub(crate) mod transaction;
pub mod update;
pub mod vacuum;
pub mod write;

pub use commit::LanceCommitExec;
pub use delete::LanceDeleteExec;
pub use merge::LanceMergeExec;
pub use scan::LanceScanExec;
pub use sink::LanceSink;
pub use target::{CommitKind, WriteOptions, WriteTarget};
pub use update::LanceUpdateExec;
pub use vacuum::{LanceVacuumExec, VacuumOptions};
pub use write::LanceWriteExec;
