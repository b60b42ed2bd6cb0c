//! [`LanceOptimizeExec`]: compacts a table's small fragments (materialising
//! deletions) and brings its indices up to date, when executed (planning,
//! and so `EXPLAIN`, changes nothing).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::MemoryPool;
use lance::Dataset;
use lance::dataset::optimize::{CompactionOptions, compact_files};
use lance::index::DatasetIndexExt;

use crate::error::Error;
use crate::location::TableLocation;
use crate::physical_plan::maintenance::{Maintenance, MaintenanceExec};

/// What `lance_optimize` does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizeOptions {
    /// Fragments with fewer rows are compacted together (Lance's default:
    /// 1,048,576).
    pub target_rows_per_fragment: usize,
    /// Rewrite fragments whose deleted share exceeds
    /// `materialize_deletions_threshold`, dropping the deleted rows.
    pub materialize_deletions: bool,
    /// The deleted share above which a fragment is rewritten (0.0–1.0).
    pub materialize_deletions_threshold: f64,
    /// Bring the indices up to date after compacting (a second version when
    /// the table has indices).
    pub indices: bool,
}

impl Default for OptimizeOptions {
    /// Lance's compaction defaults; indices optimised.
    fn default() -> Self {
        let lance = CompactionOptions::default();
        Self {
            target_rows_per_fragment: lance.target_rows_per_fragment,
            materialize_deletions: lance.materialize_deletions,
            // Through its shortest decimal form: 0.1, not 0.10000000149.
            materialize_deletions_threshold: lance
                .materialize_deletions_threshold
                .to_string()
                .parse()
                .unwrap_or(0.1),
            indices: true,
        }
    }
}

/// The schema of an optimisation's one-row report.
pub(crate) fn optimize_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("fragments_removed", DataType::UInt64, false),
        Field::new("fragments_added", DataType::UInt64, false),
        Field::new("files_removed", DataType::UInt64, false),
        Field::new("files_added", DataType::UInt64, false),
        Field::new("indices_optimized", DataType::UInt64, false),
        Field::new("version", DataType::UInt64, false),
    ]))
}

/// `lance_optimize(...)`: when executed, compacts the table at `location`
/// with Lance's `compact_files` (two versions when anything is compacted:
/// Lance 14 reserves fragment ids, then rewrites),
/// then optimises its indices (one more version when it has any). Returns
/// one row: `fragments_removed, fragments_added, files_removed, files_added,
/// indices_optimized, version` (the version it leaves).
pub type LanceOptimizeExec = MaintenanceExec<OptimizeOptions>;

impl Maintenance for OptimizeOptions {
    const NODE: &'static str = "LanceOptimizeExec";

    fn schema() -> SchemaRef {
        optimize_schema()
    }

    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            ", target_rows_per_fragment={}, materialize_deletions={}, \
             materialize_deletions_threshold={}, indices={}",
            self.target_rows_per_fragment,
            self.materialize_deletions,
            self.materialize_deletions_threshold,
            self.indices
        )
    }

    async fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        _memory: Arc<dyn MemoryPool>,
    ) -> DFResult<RecordBatch> {
        optimize(&dataset, &location, &self).await
    }
}

async fn optimize(
    dataset: &Dataset,
    location: &TableLocation,
    options: &OptimizeOptions,
) -> DFResult<RecordBatch> {
    let err = |e| DataFusionError::from(Error::lance("optimizing", &location.uri, e));
    let mut dataset = dataset.clone();
    let compaction = CompactionOptions {
        target_rows_per_fragment: options.target_rows_per_fragment,
        materialize_deletions: options.materialize_deletions,
        materialize_deletions_threshold: options.materialize_deletions_threshold as f32,
        ..Default::default()
    };
    let phase = crate::progress::Phase::enter(format!("compacting {}", location.display_uri));
    let metrics = compact_files(&mut dataset, compaction, None)
        .await
        .map_err(err)?;
    drop(phase);
    let mut indices = 0;
    if options.indices {
        let segments = |loaded: &[lance_table::format::IndexMetadata]| {
            loaded
                .iter()
                .map(|index| (index.name.clone(), index.uuid))
                .collect::<std::collections::BTreeSet<_>>()
        };
        let before = segments(&dataset.load_indices().await.map_err(err)?);
        if !before.is_empty() {
            let _phase = crate::progress::Phase::enter(format!(
                "optimizing indices of {}",
                location.display_uri
            ));
            dataset
                .optimize_indices(&Default::default())
                .await
                .map_err(err)?;
            // The indices Lance changed (it commits nothing when each one
            // covers every row already): those with a segment not there
            // before.
            let after = segments(&dataset.load_indices().await.map_err(err)?);
            indices = after
                .difference(&before)
                .map(|(name, _)| name)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
        }
    }
    let values = [
        metrics.fragments_removed as u64,
        metrics.fragments_added as u64,
        metrics.files_removed as u64,
        metrics.files_added as u64,
        indices as u64,
        dataset.version().version,
    ];
    Ok(RecordBatch::try_new(
        optimize_schema(),
        values
            .into_iter()
            .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
            .collect(),
    )?)
}
