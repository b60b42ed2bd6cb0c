//! Fragments a scalar index rules out, found at planning time.
//!
//! When Lance answers a pushed filter from a scalar index (BTREE, ZONEMAP,
//! BITMAP, …), its scanner still plans every fragment it is handed before the
//! index result prunes them; with tens of thousands of small fragments that
//! planning, not the data, sets the cost. So the scan evaluates the same index
//! query Lance would (Lance's own filter planner over the same filter and
//! version) once while planning, and hands Lance only the fragments that may
//! hold a match: those where the index's upper bound selects a row, and those
//! the index does not cover. Lance then evaluates the filter over those
//! fragments exactly as before, so the answer is the one it would give over
//! all of them; `EXPLAIN` shows the fragments left and how many were pruned.
//!
//! When the fragments left hold at most one batch of rows, Lance reads them
//! and checks the filter row by row instead of searching the index a second
//! time: a search costs as much as the whole index however few rows are left
//! (a ZONEMAP search visits every zone), a recheck of one batch almost nothing.
//!
//! Nothing is pruned (Lance gets every fragment, as without this step) when
//! the table uses stable row ids (index results are row ids, not addresses),
//! a kept fragment lacks its row count (Lance does not use indices then), the
//! index gives only a lower bound, or anything fails while evaluating.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema as ArrowSchema;
use datafusion::logical_expr::Expr;
use lance::Dataset;
use lance::index::DatasetIndexInternalExt;
use lance::io::exec::Planner;
use lance::io::exec::scalar_index::ScalarIndexExec;
use lance_index::metrics::NoOpMetricsCollector;
use lance_index::scalar::expression::PlannerIndexExt;
use lance_select::RowAddrMask;
use lance_table::format::Fragment;
use roaring::RoaringBitmap;

use crate::physical_plan::scan::fragment_by_id;

/// The fragments of `dataset` that may hold rows matching `filter` by its
/// scalar indices, in manifest order, or `None` when the indices rule out
/// none (or cannot be asked).
///
/// Works on fragment id sets (the version's, the index's, the matches'), so
/// its cost follows the fragments kept, not the fragments in the version.
pub(crate) async fn candidate_fragments(dataset: &Dataset, filter: &Expr) -> Option<Vec<Fragment>> {
    if dataset.manifest.uses_stable_row_ids() {
        return None;
    }
    let index_info = dataset.scalar_index_info().await.ok()?;
    let schema = Arc::new(ArrowSchema::from(dataset.schema()));
    let plan = Planner::new(schema)
        .create_filter_plan(filter.clone(), &index_info, true)
        .ok()?;
    let query = plan.index_query?;
    let covered = ScalarIndexExec::fragments_covered_by_index_query(&query, dataset)
        .await
        .ok()?;
    let result = query.evaluate(dataset, &NoOpMetricsCollector).await.ok()?;
    let RowAddrMask::AllowList(upper) = &result.upper else {
        return None;
    };
    // Kept: not covered by the index, or holding a row its upper bound selects.
    let all: &RoaringBitmap = dataset.fragment_bitmap();
    let selected: RoaringBitmap = upper.iter().map(|(&id, _)| id).collect();
    let kept_ids = (all - &covered) | (all & &selected);
    let fragments = dataset.fragments();
    // Duplicate fragment ids (manifests of Lance 0.16 and earlier): no sets.
    if all.len() != fragments.len() as u64 || kept_ids.len() == all.len() {
        return None;
    }
    let mut kept: Vec<(usize, &Fragment)> = kept_ids
        .iter()
        .map(|id| fragment_by_id(fragments, u64::from(id)))
        .collect::<Option<_>>()?;
    kept.sort_unstable_by_key(|&(at, _)| at);
    // Lance uses no index over fragments without row counts (legacy data).
    if kept.iter().any(|(_, f)| f.physical_rows.is_none()) {
        return None;
    }
    Some(kept.into_iter().map(|(_, f)| f.clone()).collect())
}

/// Whether Lance should search the indices again while reading the `kept`
/// fragments: not when they hold at most `batch_rows` rows in all, which it
/// reads and filters row by row for less than one more search costs.
pub(crate) fn search_again(kept: &[Fragment], batch_rows: usize) -> bool {
    let rows: usize = kept
        .iter()
        .map(|f| f.physical_rows.unwrap_or(usize::MAX))
        .fold(0, usize::saturating_add);
    rows > batch_rows
}
