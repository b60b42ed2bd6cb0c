//! Physical plan nodes, one per file, grouped by concern: `reading/`
//! (scans), `writing/` (writers, the commit node and sink, the write target,
//! the one commit path, the statement journal, write metrics), `row_level/`
//! (`DELETE`, `UPDATE`), `merging/` (upserts), `searching/` (vector,
//! full-text and hybrid search), `maintaining/` (optimize, vacuum, tags),
//! `ddl/` (`ALTER TABLE`, index changes). Each file keeps its short path
//! (`physical_plan::commit`, ...).
//!
//! Writes have a two-phase shape: [`LanceWriteExec`] writes uncommitted
//! fragments in every input partition and emits their metadata as rows;
//! [`LanceCommitExec`] (one partition) commits all of them in one transaction.
//! No in-process state connects the two, so the plan can be distributed.

pub(crate) mod alter;
pub(crate) mod commit;
pub(crate) mod delete;
pub(crate) mod hybrid;
pub(crate) mod in_flight;
pub(crate) mod index;
pub(crate) mod index_options;
pub(crate) mod journal;
pub(crate) mod maintenance;
pub(crate) mod merge;
pub(crate) mod merge_options;
pub(crate) mod optimize;
pub(crate) mod rows;
pub(crate) mod scan;
pub(crate) mod scan_metrics;
pub(crate) mod search;
pub(crate) mod sink;
pub(crate) mod tag;
pub(crate) mod target;
pub(crate) mod transaction;
pub(crate) mod update;
pub(crate) mod vacuum;
pub(crate) mod write;
pub(crate) mod write_metrics;

pub use alter::{DEFAULT_METADATA_KEY, LanceAlterExec, NewValues, SchemaChange};
pub use commit::LanceCommitExec;
pub use delete::LanceDeleteExec;
pub use hybrid::{DEFAULT_RRF_K, HybridQuery, RELEVANCE_COLUMN};
pub use index::{IndexChange, IndexDefinition, LanceIndexExec};
pub use index_options::IndexMethod;
pub use maintenance::{Maintenance, MaintenanceExec};
pub use merge::LanceMergeExec;
pub use optimize::{LanceOptimizeExec, OptimizeOptions};
pub use scan::{GroupRows, LanceScanExec, ScanOptions, ScanParts};
pub use search::{
    DISTANCE_COLUMN, LanceSearchExec, Metric, SCORE_COLUMN, SearchQuery, TextQuery, VectorQuery,
};
pub use sink::LanceSink;
pub use tag::{LanceTagExec, TagAction, TagChange};
pub use target::{CommitKind, WriteOptions, WriteTarget};
pub use update::LanceUpdateExec;
pub use vacuum::{LanceVacuumExec, VacuumOptions};
pub use write::LanceWriteExec;
