//! The adversarial table and the predicates run against every index type.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListBuilder, RecordBatch, StringArray,
    StringBuilder,
};
use datafusion::arrow::datatypes::{Field, Schema};
use lance_index::IndexType;
use lance_index::scalar::BuiltinIndexType;

/// Strings that trip LIKE-prefix extraction, case folding, byte order and
/// tokenisation.
pub(super) fn strings() -> Vec<Option<String>> {
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

pub(super) fn integers() -> Vec<Option<i64>> {
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

pub(super) fn floats() -> Vec<Option<f64>> {
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

pub(super) const ROWS: usize = 600;

/// `ROWS` rows cycling through the adversarial values, each column with its
/// own period so that values combine differently.
pub(super) fn adversarial_batch() -> RecordBatch {
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

pub(super) fn string_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// LIKE patterns without a backslash.
pub(super) const PLAIN_PATTERNS: &[&str] = &[
    "Ab1%", "Ab%", "%b1", "A_1", "%b%", "", "é%", "É%", "Abc%", "%Ab1%", "日%", "x%y", "_", "__",
    "Ab1", "%1", "%é", "hello%", "%world", "row-1%", "z%", "ab%",
];

/// LIKE patterns with backslashes: escapes of ordinary and special
/// characters, doubled and trailing backslashes.
pub(super) const ESCAPED_PATTERNS: &[&str] = &[
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
pub(super) struct Kind {
    pub(super) name: &'static str,
    pub(super) predicates: Vec<String>,
}

pub(super) fn kinds() -> Vec<Kind> {
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
pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) columns: &'static [&'static str],
    pub(super) index: IndexType,
    pub(super) builtin: Option<BuiltinIndexType>,
    /// Predicate kinds the crate must keep in DataFusion with this index.
    pub(super) kept: &'static [&'static str],
}

pub(super) fn cases() -> Vec<Case> {
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
