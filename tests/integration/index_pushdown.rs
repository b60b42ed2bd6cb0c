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

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder,
};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::scalar::{BuiltinIndexType, InvertedIndexParams, ScalarIndexParams};

use crate::util::{context, dataset_path, private_cache, try_rows};

/// Strings that trip LIKE-prefix extraction, case folding, byte order and
/// tokenisation.
fn strings() -> Vec<Option<String>> {
    let mut values: Vec<Option<String>> = [
        "",
        "Ab1",
        "Ab\\1",
        "Ab\\\\1",
        "Ab%1",
        "Ab_1",
        "ab1",
        "AB1",
        "Ab\\%1",
        "Ab\\_1",
        "\\",
        "\\\\",
        "%",
        "_",
        "50%_off",
        "é",
        "É",
        "ß",
        "SS",
        "日本語",
        "日本",
        "a\u{10FFFF}",
        "it's",
        " Ab1",
        "Ab1 ",
        "Abc",
        "abc",
        "ABC",
        "Abcdef",
        "xAb1y",
        "Ab1\\",
        "hello world",
        "Hello World",
        "row-1",
        "row-10",
        "\u{7f}",
        "z",
    ]
    .iter()
    .map(|s| Some(s.to_string()))
    .collect();
    values.push(Some(format!("{}y", "x".repeat(2000))));
    values.push(Some(format!("Ab1{}", "é".repeat(500))));
    values.push(None);
    values
}

fn integers() -> Vec<Option<i64>> {
    vec![
        Some(i64::MIN),
        Some(i64::MIN + 1),
        Some(-1),
        Some(0),
        Some(1),
        Some(42),
        Some(i64::MAX - 1),
        Some(i64::MAX),
        None,
    ]
}

fn floats() -> Vec<Option<f64>> {
    vec![
        Some(f64::NAN),
        Some(-f64::NAN),
        Some(-0.0),
        Some(0.0),
        Some(f64::INFINITY),
        Some(f64::NEG_INFINITY),
        Some(1.5),
        Some(-1.5),
        None,
    ]
}

const ROWS: usize = 600;

/// `ROWS` rows cycling through the adversarial values, each column with its
/// own period so that values combine differently.
fn adversarial_batch() -> RecordBatch {
    let (s, i, f) = (strings(), integers(), floats());
    let b = [Some(true), Some(false), None];
    let mut labels = ListBuilder::new(StringBuilder::new());
    for row in 0..ROWS {
        for k in 0..(row % 3) {
            labels.values().append_value(format!("l{}", (row + k) % 5));
        }
        labels.append(row % 7 != 0);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from_iter_values(0..ROWS as i64))),
        (
            "s",
            Arc::new(StringArray::from(
                (0..ROWS)
                    .map(|r| s[r % s.len()].clone())
                    .collect::<Vec<_>>(),
            )),
        ),
        (
            "i",
            Arc::new(Int64Array::from(
                (0..ROWS).map(|r| i[(r / 2) % i.len()]).collect::<Vec<_>>(),
            )),
        ),
        (
            "f",
            Arc::new(Float64Array::from(
                (0..ROWS).map(|r| f[(r / 3) % f.len()]).collect::<Vec<_>>(),
            )),
        ),
        (
            "b",
            Arc::new(BooleanArray::from(
                (0..ROWS).map(|r| b[(r / 5) % 3]).collect::<Vec<_>>(),
            )),
        ),
        ("l", Arc::new(labels.finish())),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), *name != "id"))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

fn string_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// LIKE patterns without a backslash.
const PLAIN_PATTERNS: &[&str] = &[
    "Ab1%", "Ab%", "%b1", "A_1", "%b%", "", "é%", "É%", "Abc%", "%Ab1%", "日%", "x%y", "_", "__",
    "Ab1", "%1", "%é", "hello%", "%world", "row-1%", "z%", "ab%",
];

/// LIKE patterns with backslashes: escapes of ordinary and special
/// characters, doubled and trailing backslashes.
const ESCAPED_PATTERNS: &[&str] = &[
    "Ab\\1%",
    "Ab\\%%",
    "Ab\\_1",
    "Ab\\\\1%",
    "Ab\\\\%",
    "\\\\%",
    "\\%",
    "\\_",
    "%\\%%",
    "Ab\\\\\\%%",
    "%\\\\",
    "Ab1\\\\",
];

/// One predicate kind over one column, with its generated predicates.
struct Kind {
    name: &'static str,
    predicates: Vec<String>,
}

fn kinds() -> Vec<Kind> {
    let strings: Vec<String> = strings()
        .into_iter()
        .flatten()
        .chain(["Ab0".to_string(), "AB".to_string(), "zz".to_string()])
        .collect();
    let ints: Vec<String> = integers()
        .into_iter()
        .flatten()
        .map(|v| v.to_string())
        .chain(["41".into(), "43".into()])
        .collect();
    let ops = ["=", "<>", "<", "<=", ">", ">="];
    let mut compare_s = Vec::new();
    let mut compare_i = Vec::new();
    // Every operator, each against a different sample of the values.
    for (o, op) in ops.iter().enumerate() {
        for (k, v) in strings.iter().enumerate().filter(|(k, _)| (k + o) % 5 == 0) {
            compare_s.push(if k % 2 == 0 {
                format!("s {op} {}", string_literal(v))
            } else {
                format!("NOT (s {op} {})", string_literal(v))
            });
        }
        for v in ints.iter().skip(o % 2).step_by(2) {
            compare_i.push(format!("i {op} {v}"));
        }
    }
    let between = vec![
        "s BETWEEN 'A' AND 'Ab2'".to_string(),
        "s NOT BETWEEN 'A' AND 'Ab2'".into(),
        "s BETWEEN 'é' AND '日本語'".into(),
        "i BETWEEN -1 AND 42".into(),
        format!("i BETWEEN {} AND 0", i64::MIN),
        format!("i NOT BETWEEN 0 AND {}", i64::MAX),
        "i BETWEEN 42 AND -1".into(),
    ];
    let in_list = vec![
        "s IN ('Ab1', 'ab1', 'é')".to_string(),
        "s IN ('Ab1', 'Ab\\1', '', 'ß', 'zz')".into(),
        "s NOT IN ('Ab1', 'AB1', 'abc', '%', '_')".into(),
        "s IN ('Ab1', NULL)".into(),
        "s NOT IN ('Ab1', NULL)".into(),
        "i IN (0, 1, 42, -1, 7)".into(),
        format!("i NOT IN ({}, 0, 1, 2, 3)", i64::MAX),
        "i IN (1, NULL)".into(),
        "i NOT IN (1, NULL)".into(),
    ];
    let null_tests = vec![
        "s IS NULL".to_string(),
        "s IS NOT NULL".into(),
        "i IS NULL".into(),
        "i IS NOT NULL".into(),
        "b IS NULL".into(),
        "NOT (b IS NULL)".into(),
        "f IS NULL".into(),
    ];
    let booleans = vec![
        "b".to_string(),
        "NOT b".into(),
        "b = true".into(),
        "b <> true".into(),
        "b = false".into(),
    ];
    let truth = vec![
        "b IS TRUE".to_string(),
        "b IS NOT TRUE".into(),
        "b IS FALSE".into(),
        "b IS NOT FALSE".into(),
        "NOT (b IS TRUE)".into(),
        "NOT (b IS FALSE)".into(),
    ];
    let distinct = vec![
        "s IS DISTINCT FROM 'Ab1'".to_string(),
        "s IS NOT DISTINCT FROM 'Ab1'".into(),
        "i IS DISTINCT FROM 0".into(),
        "i IS NOT DISTINCT FROM NULL".into(),
    ];
    let like = |patterns: &[&str], op: &str| -> Vec<String> {
        patterns
            .iter()
            .map(|p| format!("s {op} {}", string_literal(p)))
            .collect()
    };
    let mut plain = like(PLAIN_PATTERNS, "LIKE");
    plain.extend(like(PLAIN_PATTERNS, "NOT LIKE"));
    let mut escaped = like(ESCAPED_PATTERNS, "LIKE");
    escaped.extend(like(ESCAPED_PATTERNS, "NOT LIKE"));
    let mut ilike = like(PLAIN_PATTERNS, "ILIKE");
    ilike.extend(like(&ESCAPED_PATTERNS[..4], "NOT ILIKE"));
    let floats = vec![
        "f > 1.0".to_string(),
        "f < -1.0".into(),
        "f = 'NaN'::double".into(),
        "f >= 'inf'::double".into(),
        "f <> 1.5".into(),
    ];
    let combined = vec![
        "(s LIKE 'Ab%' OR i = 42) AND NOT b".to_string(),
        "NOT (s LIKE 'Ab\\1%' OR i < 0)".into(),
        "(s = 'é' OR s IS NULL) AND (i IS NOT NULL OR b)".into(),
        "NOT (NOT (i > 0) AND s NOT IN ('Ab1', 'abc'))".into(),
        // DataFusion turns these into CASE expressions, which stay with it.
        "s LIKE '%'".into(),
        "s NOT LIKE '%'".into(),
    ];
    vec![
        Kind {
            name: "compare(s)",
            predicates: compare_s,
        },
        Kind {
            name: "compare(i)",
            predicates: compare_i,
        },
        Kind {
            name: "between",
            predicates: between,
        },
        Kind {
            name: "in",
            predicates: in_list,
        },
        Kind {
            name: "null",
            predicates: null_tests,
        },
        Kind {
            name: "bool",
            predicates: booleans,
        },
        Kind {
            name: "truth",
            predicates: truth,
        },
        Kind {
            name: "distinct",
            predicates: distinct,
        },
        Kind {
            name: "like",
            predicates: plain,
        },
        Kind {
            name: "like-escaped",
            predicates: escaped,
        },
        Kind {
            name: "ilike",
            predicates: ilike,
        },
        Kind {
            name: "float",
            predicates: floats,
        },
        Kind {
            name: "combined",
            predicates: combined,
        },
    ]
}

/// An index type and the columns it is built on.
struct Case {
    name: &'static str,
    columns: &'static [&'static str],
    index: IndexType,
    builtin: Option<BuiltinIndexType>,
    /// Predicate kinds the crate must keep in DataFusion with this index.
    kept: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "BTREE",
            columns: &["s", "i", "b", "f"],
            index: IndexType::BTree,
            builtin: Some(BuiltinIndexType::BTree),
            kept: &["truth", "like-escaped", "float"],
        },
        Case {
            name: "BITMAP",
            columns: &["s", "i", "b"],
            index: IndexType::Bitmap,
            builtin: Some(BuiltinIndexType::Bitmap),
            kept: &["truth"],
        },
        Case {
            name: "ZONEMAP",
            columns: &["s", "i", "f"],
            index: IndexType::ZoneMap,
            builtin: Some(BuiltinIndexType::ZoneMap),
            kept: &["like-escaped", "float"],
        },
        Case {
            name: "BLOOMFILTER",
            columns: &["s", "i"],
            index: IndexType::BloomFilter,
            builtin: Some(BuiltinIndexType::BloomFilter),
            kept: &[],
        },
        Case {
            name: "NGRAM",
            columns: &["s"],
            index: IndexType::NGram,
            builtin: Some(BuiltinIndexType::NGram),
            kept: &["like-escaped"],
        },
        Case {
            name: "INVERTED",
            columns: &["s"],
            index: IndexType::Inverted,
            builtin: None,
            kept: &[],
        },
        Case {
            name: "LABEL_LIST",
            columns: &["l"],
            index: IndexType::LabelList,
            builtin: Some(BuiltinIndexType::LabelList),
            kept: &[],
        },
        // Not audited: every filter on the column stays in DataFusion.
        Case {
            name: "FM",
            columns: &["s"],
            index: IndexType::Fm,
            builtin: Some(BuiltinIndexType::Fm),
            kept: &["compare(s)", "like", "like-escaped", "ilike"],
        },
    ]
}

/// Where a query's filter runs: in the Lance scan (`Some(true)`), in a
/// DataFusion FilterExec (`Some(false)`), or nowhere (`None`: DataFusion
/// simplified it away, e.g. `s LIKE '%'` into `s IS NOT NULL` on a column
/// statistics say has no NULL).
async fn filter_in_lance(ctx: &SessionContext, sql: &str) -> Result<Option<bool>, String> {
    let plan = ctx
        .sql(&format!("EXPLAIN {sql}"))
        .await
        .map_err(|e| e.to_string())?
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    let text = crate::util::sorted_rows(&plan).join("\n");
    let scan = text
        .lines()
        .find(|l| l.contains("LanceScanExec"))
        .ok_or("no scan")?;
    Ok(if scan.contains(", filter=") {
        Some(true)
    } else if text.contains("FilterExec") {
        Some(false)
    } else {
        None
    })
}

#[derive(Default, Debug)]
struct Tally {
    queries: usize,
    in_lance: usize,
    no_filter: usize,
    with_rows: usize,
    errors: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_index_type_answers_like_datafusion() {
    let dir = tempfile::tempdir().unwrap();
    let batch = adversarial_batch();
    let kinds = kinds();
    let mut total = Tally::default();
    for case in cases() {
        let uri = dataset_path(&dir, &format!("{}.lance", case.name.to_lowercase()));
        let mut ds = crate::fixtures::write(
            &uri,
            vec![batch.clone()],
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
                    Ok(Some(true)) => tally.in_lance += 1,
                    Ok(Some(false)) => {}
                    Ok(None) => tally.no_filter += 1,
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
        }
    }
    // Not vacuous: most predicates select rows, and most ran in Lance.
    assert!(total.with_rows * 10 >= total.queries * 8, "{total:?}");
    assert!(total.in_lance * 10 >= total.queries * 6, "{total:?}");
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
    use crate::faults::{Fault, FaultInjector};
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "indexed.lance");
    crate::fixtures::indexed(&uri).await;
    let faults = FaultInjector::new();
    // No metadata cache: the index list is read when a scan is planned.
    let uncached = datafusion_lance::LanceSessionCache::private(datafusion_lance::CacheBudgets {
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
    assert_eq!(filter_in_lance(&ctx, sql).await.unwrap(), Some(false));
    assert_eq!(crate::util::ints(&ctx, sql).await, vec![16]);
    assert!(faults.injected() > 0, "the index list was asked for");
}
