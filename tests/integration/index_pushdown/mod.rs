//! Filters on indexed columns against DataFusion, index type by index type.
//!
//! Lance answers a pushed filter from a scalar index with the index's own
//! semantics; the crate lets it only for audited (predicate, index type)
//! pairs. For every index type this test builds a table of adversarial values
//! (backslashes before ordinary and special characters, `%`/`_`, NULL, empty
//! strings, case, non-ASCII, long strings, NaN, ±0.0, integer extremes),
//! indexes it, and runs every predicate kind with pushdown forced on, against
//! the same rows in a `MemTable`. It also checks from the plans that the
//! audited pairs really reach Lance and the others really stay in DataFusion,
//! so agreement is not reached by never asking Lance.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use lance::index::DatasetIndexExt;
use lance_index::scalar::{InvertedIndexParams, ScalarIndexParams};

mod cases;

use self::cases::{adversarial_batch, cases, kinds};
use crate::support::{context, dataset_path, private_cache, try_rows};

/// Where a query's filter runs: in the Lance scan (`Some(true)`), in a
/// DataFusion FilterExec (`Some(false)`), or nowhere (`None`: DataFusion
/// simplified it away, e.g. `s LIKE '%'` into `s IS NOT NULL` on a column
/// statistics say has no NULL); and whether an index pruned fragments.
async fn filter_in_lance(ctx: &SessionContext, sql: &str) -> Result<(Option<bool>, bool), String> {
    let plan = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .map_err(|e| e.to_string())?
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    let text = crate::support::sorted_rows(&plan).join("\n");
    let scan = text
        .lines()
        .find(|l| l.contains("LanceScanExec"))
        .ok_or("no scan")?;
    let pruned = scan.contains("pruned_fragments=");
    let place = if scan.contains(", filter=") {
        Some(true)
    } else if text.contains("FilterExec") {
        Some(false)
    } else {
        None
    };
    Ok((place, pruned))
}

#[derive(Default, Debug)]
struct Tally {
    queries: usize,
    in_lance: usize,
    no_filter: usize,
    with_rows: usize,
    errors: usize,
    /// Plans where the index pruned fragments at planning.
    pruned: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_index_type_answers_like_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let batch = adversarial_batch();
    let kinds = kinds();
    let mut total = Tally::default();
    for case in cases() {
        let uri = dataset_path(&dir, &format!("{}.lance", case.name.to_lowercase()));
        // Stored clustered by the first indexed column, so that indices
        // rule out whole fragments and pruning takes part in the comparison.
        let stored = clustered(&batch, case.columns[0]);
        let mut ds = crate::fixtures::write(
            &uri,
            vec![stored],
            crate::fixtures::params(lance::dataset::WriteMode::Create, 100),
        )
        .await;
        for column in case.columns {
            let created = match &case.builtin {
                Some(builtin) => {
                    ds.create_index(
                        &[column],
                        case.index,
                        None,
                        &ScalarIndexParams::for_builtin(builtin.clone()),
                        true,
                    )
                    .await
                }
                None => {
                    ds.create_index(
                        &[column],
                        case.index,
                        None,
                        &InvertedIndexParams::default(),
                        true,
                    )
                    .await
                }
            };
            created.unwrap_or_else(|e| panic!("{} index on {column}: {e}", case.name));
        }
        let ctx = context(2, &private_cache());
        ctx.sql("SET lance.pushdown_filters = true").await.unwrap();
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .unwrap();
        let mem = MemTable::try_new(batch.schema(), vec![vec![batch.clone()]]).unwrap();
        ctx.register_table("m", Arc::new(mem)).unwrap();

        for kind in &kinds {
            let mut tally = Tally::default();
            for predicate in &kind.predicates {
                let lance_sql = format!("SELECT id, s, i, f, b FROM t WHERE {predicate}");
                let mem_sql = lance_sql.replace(" FROM t ", " FROM m ");
                tally.queries += 1;
                let (got, want) = (
                    try_rows(&ctx, &lance_sql).await,
                    try_rows(&ctx, &mem_sql).await,
                );
                match (got, want) {
                    (Ok(got), Ok(want)) => {
                        assert!(
                            got == want,
                            "{} index, {}: {predicate}\n  lance: {} rows {:?}\n  datafusion: {} rows {:?}",
                            case.name,
                            kind.name,
                            got.len(),
                            got.iter().take(4).collect::<Vec<_>>(),
                            want.len(),
                            want.iter().take(4).collect::<Vec<_>>()
                        );
                        if !got.is_empty() {
                            tally.with_rows += 1;
                        }
                    }
                    (got, want) => {
                        tally.errors += 1;
                        assert!(
                            got.is_err() && want.is_err(),
                            "{} index: {predicate}: one side failed: lance {:?} / datafusion {:?}",
                            case.name,
                            got.err(),
                            want.err()
                        );
                    }
                }
                match filter_in_lance(&ctx, &lance_sql).await {
                    Ok((place, pruned)) => {
                        match place {
                            Some(true) => tally.in_lance += 1,
                            Some(false) => {}
                            None => tally.no_filter += 1,
                        }
                        tally.pruned += usize::from(pruned);
                    }
                    Err(e) => panic!("EXPLAIN {lance_sql}: {e}"),
                }
            }
            // Where single-column kinds must run: audited pairs (and columns
            // without an index) in Lance, the rest in DataFusion.
            if let Some(column) = kind_column(kind.name) {
                if case.columns.contains(&column) && case.kept.contains(&kind.name) {
                    assert_eq!(
                        tally.in_lance, 0,
                        "{} index: {} must stay in DataFusion: {tally:?}",
                        case.name, kind.name
                    );
                } else {
                    assert_eq!(
                        tally.in_lance,
                        tally.queries - tally.no_filter,
                        "{} index: {} should be evaluated by Lance: {tally:?}",
                        case.name,
                        kind.name
                    );
                }
            }
            assert_eq!(tally.errors, 0, "{} {}: {tally:?}", case.name, kind.name);
            total.queries += tally.queries;
            total.in_lance += tally.in_lance;
            total.with_rows += tally.with_rows;
            total.pruned += tally.pruned;
        }
    }
    eprintln!("index differential: {total:?}");
    // Not vacuous: most predicates select rows, and most ran in Lance.
    assert!(total.with_rows * 10 >= total.queries * 8, "{total:?}");
    assert!(total.in_lance * 10 >= total.queries * 6, "{total:?}");
    // Fragments pruned by an index at planning are part of what is compared.
    assert!(total.pruned * 20 >= total.queries, "{total:?}");
}

/// `batch` sorted by `column` (as it is when that column is a list).
fn clustered(batch: &RecordBatch, column: &str) -> RecordBatch {
    use datafusion::arrow::compute::{sort_to_indices, take_record_batch};
    let values = batch.column_by_name(column).expect("indexed column");
    match sort_to_indices(values, None, None) {
        Ok(order) => take_record_batch(batch, &order).expect("reordered batch"),
        Err(_) => batch.clone(),
    }
}

/// The one column a predicate kind reads (None for kinds mixing columns).
fn kind_column(kind: &str) -> Option<&'static str> {
    match kind {
        "compare(s)" | "like" | "like-escaped" | "ilike" => Some("s"),
        "compare(i)" => Some("i"),
        "bool" | "truth" => Some("b"),
        "float" => Some("f"),
        _ => None,
    }
}

/// When the index list cannot be read, nothing goes to Lance and Lance is
/// told not to use indices: the answer is DataFusion's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_index_list_keeps_filters_in_datafusion() {
    use crate::support::faults::{Fault, FaultInjector};
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "indexed.lance");
    crate::fixtures::indexed(&uri).await;
    let faults = FaultInjector::new();
    // No metadata cache: the index list is read when a scan is planned.
    let uncached =
        datafusion_lance::LanceSessionCache::private(datafusion_lance::options::CacheBudgets {
            metadata_bytes: 0,
            index_bytes: 0,
        });
    let ctx = context(2, &uncached);
    ctx.sql("SET lance.pushdown_filters = true").await.unwrap();
    let provider = datafusion_lance::LanceTableProvider::builder(&uri)
        .with_name("t")
        .with_store_params(faults.params())
        .with_session_cache(Arc::clone(&uncached))
        .build()
        .await
        .unwrap();
    ctx.register_table("t", Arc::new(provider)).unwrap();
    // The manifest is held; reading its index section fails from now on.
    for operation in ["get_opts", "get_ranges"] {
        faults.fail(Fault::always(operation, "_versions/"));
    }
    let sql = "SELECT count(*) FROM t WHERE s LIKE 'Ab1%'";
    assert_eq!(
        filter_in_lance(&ctx, sql).await.unwrap(),
        (Some(false), false)
    );
    assert_eq!(crate::support::ints(&ctx, sql).await, vec![16]);
    assert!(faults.injected() > 0, "the index list was asked for");
}
