//! Physical plan nodes, one per file, grouped by concern: `reading/`
//! (scans), `writing/` (writers, the commit node and sink, the write target,
//! the one commit path, the statement journal, write metrics), `row_level/`
//! (`DELETE`, `UPDATE`), `merging/` (upserts), `searching/` (vector,
//! full-text and hybrid search), `maintaining/` (optimize, vacuum, tags),
//! `ddl/` (`ALTER TABLE`, index changes), `permuting/` (permutation plans); beside them, what every statement
//! node uses: `one_row` (its result) and `inputs` (running its input).
//! Inside the crate each file keeps
//! its short path (`physical_plan::commit`, ...), re-exported below.
//!
//! Writes have a two-phase shape: [`LanceWriteExec`] writes uncommitted
//! fragments in every input partition and emits their metadata as rows;
//! [`LanceCommitExec`] (one partition) commits all of them in one transaction.
//! No in-process state connects the two, so the plan can be distributed.

mod ddl;
pub(crate) mod inputs;
mod maintaining;
mod merging;
pub(crate) mod one_row;
mod permuting;
mod reading;
mod row_level;
mod searching;
mod writing;

pub(crate) use ddl::{alter, cloud_ddl, index, index_memory, index_options};
pub(crate) use maintaining::{maintenance, optimize, tag, vacuum};
pub(crate) use merging::{cloud_merge, merge, merge_options};
pub(crate) use permuting::{
    build as permutation_build, format as permutation_format, read as permutation_read,
    split as permutation_split, validate as permutation_validate,
};
pub(crate) use reading::{cloud_scan, scan, scan_metrics};
pub(crate) use row_level::{cloud_change, delete, rows, update};
pub(crate) use searching::{cloud_search, hybrid, search};
pub(crate) use writing::{
    cloud_write, commit, fragment_rows, in_flight, journal, sink, target, transaction, write,
    write_metrics, writers,
};

pub use alter::{DEFAULT_METADATA_KEY, LanceAlterExec, NewValues, SchemaChange};
pub use cloud_change::CloudChangeExec;
pub use cloud_ddl::CloudDdlExec;
pub use cloud_merge::CloudMergeExec;
pub use cloud_scan::{CloudScanExec, RowRange};
pub use cloud_search::CloudSearchExec;
pub use cloud_write::CloudWriteExec;
pub use commit::LanceCommitExec;
pub use delete::LanceDeleteExec;
pub use hybrid::{DEFAULT_RRF_K, HybridQuery, RELEVANCE_COLUMN};
pub use index::{IndexChange, IndexDefinition, LanceIndexExec};
pub use index_options::IndexMethod;
pub use maintenance::{Maintenance, MaintenanceExec};
pub use merge::LanceMergeExec;
pub use optimize::{LanceOptimizeExec, OptimizeOptions};
pub use permutation_build::PermutationBuildExec;
pub use permutation_format::{BuildOptions, SplitSizes, SplitStrategy};
pub use permutation_read::{PermutationRead, PermutationScanExec};
pub use permutation_split::PermutationSplitExec;
pub use permutation_validate::{PlanSummary, SplitSelector};
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
