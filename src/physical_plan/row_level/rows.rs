//! Row addresses: collecting them from plans and turning them into Lance
//! deletion vectors. Shared by `DELETE` and `UPDATE`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, UInt64Array};
use datafusion::common::runtime::JoinSet;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use lance::Dataset;
use lance_table::format::Fragment;
use lance_table::io::deletion::relative_deletion_file_path;
use roaring::RoaringTreemap;

/// Reads the row addresses in column `column` of every stream, concurrently.
pub(crate) async fn collect_addresses(
    streams: Vec<SendableRecordBatchStream>,
    column: usize,
) -> DFResult<RoaringTreemap> {
    let mut readers = JoinSet::new();
    for mut stream in streams {
        readers.spawn(async move {
            let mut addresses = RoaringTreemap::new();
            while let Some(batch) = stream.next().await {
                addresses.extend(addresses_of(batch?.column(column).as_ref())?);
            }
            Ok::<_, DataFusionError>(addresses)
        });
    }
    let mut all = RoaringTreemap::new();
    while let Some(joined) = readers.join_next().await {
        let part = joined
            .map_err(|e| DataFusionError::Execution(format!("a reader task failed: {e}")))??;
        all |= part;
    }
    Ok(all)
}

/// The non-null values of a `_rowaddr` column.
pub(crate) fn addresses_of(column: &dyn Array) -> DFResult<Vec<u64>> {
    let addresses = column
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or_else(|| DataFusionError::Internal("_rowaddr is not UInt64".into()))?;
    Ok(addresses.iter().flatten().collect())
}

/// Marks `addresses` deleted: new deletion files for the fragments they touch.
/// Returns the updated fragments and the ids of fragments left empty. On
/// failure, the deletion files already written are removed (best effort).
pub(crate) async fn apply_deletions(
    base: &Arc<Dataset>,
    addresses: &RoaringTreemap,
) -> lance::Result<(Vec<Fragment>, Vec<u64>)> {
    let mut updated = Vec::new();
    let mut removed = Vec::new();
    for (fragment_id, offsets) in addresses.bitmaps() {
        let Some(fragment) = base.get_fragment(fragment_id as usize) else {
            remove_new_deletion_files(base, &updated).await;
            return Err(lance::Error::internal(format!(
                "row address of fragment {fragment_id}, which version {} does not have",
                base.version_id()
            )));
        };
        match fragment.extend_deletions(offsets.iter()).await {
            Ok(Some(fragment)) => updated.push(fragment.metadata().clone()),
            Ok(None) => removed.push(u64::from(fragment_id)),
            Err(e) => {
                remove_new_deletion_files(base, &updated).await;
                return Err(e);
            }
        }
    }
    Ok((updated, removed))
}

/// Deletes the deletion files of `updated` that `base` does not reference:
/// the files a DELETE / UPDATE wrote before its commit failed (best effort;
/// failures are logged, and `lance_vacuum` removes what is left).
pub(crate) async fn remove_new_deletion_files(base: &Dataset, updated: &[Fragment]) {
    let Ok(store) = base.object_store(None).await else {
        return;
    };
    for fragment in updated {
        let Some(file) = &fragment.deletion_file else {
            continue;
        };
        let before = base
            .get_fragment(fragment.id as usize)
            .and_then(|f| f.metadata().deletion_file.clone());
        if before.as_ref() == Some(file) {
            continue;
        }
        let relative = relative_deletion_file_path(fragment.id, file);
        let name = relative.rsplit('/').next().unwrap_or(&relative);
        let path = base.deletions_dir().join(name);
        if let Err(e) = store.delete(&path).await {
            log::warn!("could not remove orphaned deletion file '{path}': {e}");
        }
    }
}
