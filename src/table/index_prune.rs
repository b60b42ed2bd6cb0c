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
//! Nothing is pruned (Lance gets every fragment, as without this step) when
//! the table uses stable row ids (index results are row ids, not addresses),
//! a fragment lacks its row count (Lance does not use indices then), the
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

/// The fragments of `dataset` that may hold rows matching `filter` by its
/// scalar indices, in manifest order, or `None` when the indices rule out
/// none (or cannot be asked).
pub(crate) async fn candidate_fragments(dataset: &Dataset, filter: &Expr) -> Option<Vec<Fragment>> {
    let fragments = dataset.fragments();
    if dataset.manifest.uses_stable_row_ids() || fragments.iter().any(|f| f.physical_rows.is_none())
    {
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
    let keep = |f: &Fragment| {
        u32::try_from(f.id).map_or(true, |id| !covered.contains(id) || upper.get(&id).is_some())
    };
    let kept: Vec<Fragment> = fragments.iter().filter(|f| keep(f)).cloned().collect();
    (kept.len() < fragments.len()).then_some(kept)
}
