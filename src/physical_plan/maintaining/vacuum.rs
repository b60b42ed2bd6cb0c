//! [`LanceVacuumExec`]: removes old versions and unreferenced files of a
//! table when executed (planning, and so `EXPLAIN`, does nothing).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::MemoryPool;
use futures::TryStreamExt;
use lance::Dataset;
use lance_table::io::deletion::relative_deletion_file_path;

use crate::error::Error;
use crate::location::TableLocation;
use crate::physical_plan::in_flight::oldest_in_flight;
use crate::physical_plan::journal;
use crate::physical_plan::maintenance::{Maintenance, MaintenanceExec};

/// What a vacuum removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumOptions {
    /// Versions older than this are removed (the latest and tagged versions
    /// are always kept).
    pub older_than: TimeDelta,
    /// Files no version references are removed when last modified longer
    /// ago than this.
    pub orphans_older_than: TimeDelta,
}

impl Default for VacuumOptions {
    /// A week for both (Lance's own threshold for unreferenced files).
    fn default() -> Self {
        Self {
            older_than: TimeDelta::days(7),
            orphans_older_than: TimeDelta::days(7),
        }
    }
}

/// The schema of a vacuum's one-row report.
pub(crate) fn vacuum_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("versions_removed", DataType::UInt64, false),
        Field::new("files_removed", DataType::UInt64, false),
        Field::new("orphans_removed", DataType::UInt64, false),
        Field::new("bytes_removed", DataType::UInt64, false),
    ]))
}

/// `lance_vacuum(...)`: when executed, removes the versions of a table older
/// than `older_than` with the files only they referenced (Lance's
/// `cleanup_old_versions`), then the data and deletion files no remaining
/// version references that are older than `orphans_older_than` — never one
/// a statement of this process that is still running may commit. Returns
/// one row: `versions_removed, files_removed, orphans_removed,
/// bytes_removed`.
pub type LanceVacuumExec = MaintenanceExec<VacuumOptions>;

impl Maintenance for VacuumOptions {
    const NODE: &'static str = "LanceVacuumExec";

    fn schema() -> SchemaRef {
        vacuum_schema()
    }

    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            ", older_than={}, orphans_older_than={}",
            self.older_than, self.orphans_older_than
        )
    }

    async fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        _memory: Arc<dyn MemoryPool>,
    ) -> DFResult<RecordBatch> {
        vacuum(&dataset, &location, &self).await
    }
}

async fn vacuum(
    dataset: &Dataset,
    location: &TableLocation,
    options: &VacuumOptions,
) -> DFResult<RecordBatch> {
    let err = |e| DataFusionError::from(Error::lance("vacuuming", &location.uri, e));
    let stats = dataset
        .cleanup_old_versions(options.older_than, Some(false), Some(false))
        .await
        .map_err(err)?;
    let store = dataset.object_store(None).await.map_err(err)?;
    // Never a file a statement of this process may still commit.
    let mut cutoff = Utc::now() - options.orphans_older_than;
    if let Some(started) = oldest_in_flight(&location.uri) {
        cutoff = cutoff.min(started - TimeDelta::seconds(1));
    }
    // The candidates are listed before the in-flight markers: a writer puts
    // its marker before its first file, so a listed file of a running
    // statement elsewhere always has its marker seen below.
    let mut candidates = Vec::new();
    for dir in [dataset.data_dir(), dataset.deletions_dir()] {
        let listed: Vec<_> = store
            .read_dir_all(&dir, Some(cutoff))
            .try_collect()
            .await
            .map_err(err)?;
        candidates.extend(listed);
    }
    // Nor a file of a statement writing from another process.
    let base = dataset.branch_location().path;
    if let Some(started) = journal::oldest(&store, &base).await.map_err(err)? {
        cutoff = cutoff.min(started - TimeDelta::seconds(1));
    }
    // Files referenced by any remaining version: data files and deletion
    // files — read after the markers, so a statement that finished
    // meanwhile has its committed files counted here.
    let mut referenced: HashSet<String> = HashSet::new();
    for version in dataset.versions().await.map_err(err)? {
        let at = dataset
            .checkout_version(version.version)
            .await
            .map_err(err)?;
        for fragment in at.fragments().iter() {
            referenced.extend(fragment.files.iter().map(|f| f.path.clone()));
            if let Some(file) = &fragment.deletion_file {
                let relative = relative_deletion_file_path(fragment.id, file);
                referenced.insert(relative.rsplit('/').next().unwrap_or("").to_string());
            }
        }
    }
    let (mut orphans, mut bytes) = (0u64, stats.bytes_removed);
    for meta in candidates {
        let name = meta.location.filename().unwrap_or_default().to_string();
        if referenced.contains(&name) || meta.last_modified >= cutoff {
            continue;
        }
        store.delete(&meta.location).await.map_err(err)?;
        orphans += 1;
        bytes += meta.size;
    }
    let values = [
        stats.old_versions,
        stats.data_files_removed + stats.deletion_files_removed + stats.transaction_files_removed,
        orphans,
        bytes,
    ];
    Ok(RecordBatch::try_new(
        vacuum_schema(),
        values
            .into_iter()
            .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
            .collect(),
    )?)
}
