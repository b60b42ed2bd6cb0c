//! Which pushed filters Lance may answer from its scalar indices.
//!
//! A filter the scan accepted ([`super::pushdown`]) is evaluated by Lance with
//! DataFusion's own expressions — unless an index on one of its columns
//! answers it, with the index's own semantics. Lance 14 uses an index for a
//! predicate when the index's query parser accepts it; some answers are exact,
//! others a superset Lance re-checks with the original filter, and a few
//! differ from DataFusion (an audit of lance-index 14.0.2's parsers):
//!
//! * `LIKE` patterns holding a backslash: BTREE and ZONEMAP extract the prefix
//!   keeping backslashes before ordinary characters (`'Ab\1%'` becomes prefix
//!   `Ab\1`, DataFusion reads `Ab1`), and NGRAM takes the backslash literally
//!   when it picks candidates: rows are lost or wrongly selected.
//! * `NOT (b IS TRUE)` and friends: BTREE and BITMAP answer `b IS TRUE` as
//!   `b = true`, whose NULL rows the `NOT` then drops; DataFusion keeps them.
//! * floating-point columns: ZONEMAP prunes zones holding only NaN from range
//!   queries that match NaN in DataFusion's total order.
//!
//! So a conjunct goes to Lance only when every predicate in it that reads an
//! indexed column is an audited (predicate, index type) pair of [`allowed`],
//! for every index on that column; floating-point columns with an index, index
//! types not in the list (including types written by newer Lance versions) and
//! indices whose type cannot be read keep the conjunct in DataFusion. When the
//! index list itself cannot be read, nothing goes to Lance and Lance is told
//! not to use scalar indices at all. `tests/integration/index_pushdown.rs`
//! checks every pair against DataFusion over adversarial values.

use std::collections::HashMap;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{Between, InList, Like};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use lance::Dataset;
use lance::index::DatasetIndexExt;

/// Index types Lance 14 can hold, as far as filters are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IndexKind {
    /// B-tree (`BTREE`).
    BTree,
    /// Bitmap (`BITMAP`).
    Bitmap,
    /// Zone map (`ZONEMAP`).
    ZoneMap,
    /// Bloom filter (`BLOOMFILTER`).
    BloomFilter,
    /// N-gram (`NGRAM`).
    NGram,
    /// Full-text (`INVERTED`).
    Inverted,
    /// Label list (`LABEL_LIST`, on list columns).
    LabelList,
    /// Any other type (RTREE, FM, MinHash-LSH, JSON, vector indices, types
    /// of newer Lance versions) or one whose type is not recorded.
    Other(String),
}

impl IndexKind {
    /// The kind of an index from the type URL of its details.
    pub(crate) fn from_type_url(type_url: &str) -> Self {
        match lance_index::registry::plugin_name_from_details_url(type_url).as_str() {
            "btree" => Self::BTree,
            "bitmap" => Self::Bitmap,
            "zonemap" => Self::ZoneMap,
            "bloomfilter" => Self::BloomFilter,
            "ngram" => Self::NGram,
            "inverted" => Self::Inverted,
            "labellist" => Self::LabelList,
            other => Self::Other(other.to_string()),
        }
    }

    /// The kind of an index a LanceDB service lists: by its type URL when
    /// the service gives one, else by its type name (`BTREE`, `FTS`, ...).
    pub(crate) fn listed(index_type: Option<&str>, type_url: Option<&str>) -> Self {
        if let Some(url) = type_url.filter(|u| !u.is_empty()) {
            return Self::from_type_url(url);
        }
        let name: String = index_type
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_uppercase())
            .collect();
        match name.as_str() {
            "BTREE" => Self::BTree,
            "BITMAP" => Self::Bitmap,
            "ZONEMAP" => Self::ZoneMap,
            "BLOOMFILTER" => Self::BloomFilter,
            "NGRAM" => Self::NGram,
            "INVERTED" | "FTS" => Self::Inverted,
            "LABELLIST" => Self::LabelList,
            "" => Self::Other("unrecorded".to_string()),
            _ => Self::Other(name),
        }
    }
}

/// The shape of one predicate, as the index parsers tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Predicate {
    /// `=`, `<>`, `<`, `<=`, `>`, `>=`.
    Compare,
    /// `IS [NOT] DISTINCT FROM`.
    Distinct,
    /// `IS [NOT] NULL`.
    NullTest,
    /// `IS [NOT] TRUE`, `IS [NOT] FALSE`.
    TruthTest,
    /// A boolean column used as a predicate.
    BoolColumn,
    /// `[NOT] BETWEEN`.
    Between,
    /// `[NOT] IN (<literals>)`.
    InList,
    /// `[NOT] LIKE` with a pattern holding no backslash.
    Like,
    /// `[NOT] LIKE` with a pattern holding a backslash (or `ESCAPE`).
    LikeEscaped,
    /// `[NOT] ILIKE`.
    ILike,
}

/// The audited (predicate, index type) pairs: Lance's answer with that index
/// equals DataFusion's, or is a superset Lance re-checks with the original
/// filter, or the index does not take part at all.
pub(crate) fn allowed(predicate: Predicate, index: &IndexKind) -> bool {
    use IndexKind::*;
    use Predicate::*;
    !matches!(
        (predicate, index),
        (_, Other(_))
            | (TruthTest, BTree | Bitmap | ZoneMap | BloomFilter)
            | (LikeEscaped, BTree | ZoneMap | NGram)
    )
}

/// The indices of one table version, by column.
#[derive(Debug, Default)]
pub(crate) struct ColumnIndexes {
    by_column: HashMap<String, Vec<IndexKind>>,
    /// Index names, by column.
    names: HashMap<String, Vec<String>>,
    /// The index list could not be read: assume every column is indexed by
    /// something unknown.
    unreadable: bool,
}

impl ColumnIndexes {
    /// Reads the index list of `dataset` (cached by the Lance session).
    pub(crate) async fn of(dataset: &Dataset) -> Self {
        let indices = match dataset.load_indices().await {
            Ok(indices) => indices,
            Err(e) => {
                log::warn!(
                    "could not read the index list of Lance table version {}: filters stay with \
                     DataFusion and scalar indices are not used ({e})",
                    dataset.version_id()
                );
                return Self {
                    unreadable: true,
                    ..Self::default()
                };
            }
        };
        let mut by_column: HashMap<String, Vec<IndexKind>> = HashMap::new();
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        for index in indices.iter() {
            let kind = match &index.index_details {
                Some(details) => IndexKind::from_type_url(&details.type_url),
                None => IndexKind::Other("unrecorded".to_string()),
            };
            for &field in &index.fields {
                let name = match dataset.schema().field_by_id(field) {
                    Some(field) => field.name.clone(),
                    // A field this version cannot name: treat as unreadable.
                    None => {
                        return Self {
                            unreadable: true,
                            ..Self::default()
                        };
                    }
                };
                let named = names.entry(name.clone()).or_default();
                if !named.contains(&index.name) {
                    named.push(index.name.clone());
                }
                by_column.entry(name).or_default().push(kind.clone());
            }
        }
        Self {
            by_column,
            names,
            unreadable: false,
        }
    }

    /// The indices a LanceDB service lists for one version.
    pub(crate) fn listed(indices: &[crate::cloud::client::ListedIndex]) -> Self {
        let mut by_column: HashMap<String, Vec<IndexKind>> = HashMap::new();
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        for index in indices {
            let kind = IndexKind::listed(index.index_type.as_deref(), index.type_url.as_deref());
            for column in &index.columns {
                let named = names.entry(column.clone()).or_default();
                if !named.contains(&index.name) {
                    named.push(index.name.clone());
                }
                by_column
                    .entry(column.clone())
                    .or_default()
                    .push(kind.clone());
            }
        }
        Self {
            by_column,
            names,
            unreadable: false,
        }
    }

    /// Nothing is known of the indices: every column may have one Lance
    /// uses with semantics of its own.
    pub(crate) fn unknown() -> Self {
        Self {
            unreadable: true,
            ..Self::default()
        }
    }

    /// The names of the indices on `column`.
    pub(crate) fn names_on(&self, column: &str) -> &[String] {
        self.names
            .get(column)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// True when the index list could not be read.
    pub(crate) fn unreadable(&self) -> bool {
        self.unreadable
    }

    /// Whether `column` has an index of `kind`.
    pub(crate) fn has(&self, column: &str, kind: &IndexKind) -> bool {
        self.by_column
            .get(column)
            .is_some_and(|kinds| kinds.contains(kind))
    }

    /// The columns with an index of `kind`.
    pub(crate) fn columns_with(&self, kind: &IndexKind) -> Vec<String> {
        let mut columns: Vec<String> = self
            .by_column
            .iter()
            .filter(|(_, kinds)| kinds.contains(kind))
            .map(|(column, _)| column.clone())
            .collect();
        columns.sort();
        columns
    }

    /// True when some index covers `column`.
    pub(crate) fn covers(&self, column: &str) -> bool {
        self.unreadable || self.by_column.contains_key(column)
    }

    /// True when Lance may evaluate `conjunct` with its indices in play.
    pub(crate) fn allows(&self, conjunct: &Expr, schema: &Schema) -> bool {
        if self.unreadable {
            return false;
        }
        let mut ok = true;
        visit_predicates(conjunct, &mut |predicate, columns| {
            for column in columns {
                let Some(kinds) = self.by_column.get(column.as_str()) else {
                    continue;
                };
                let float = schema
                    .field_with_name(column.as_str())
                    .is_ok_and(|f| f.data_type().is_floating());
                if float || !kinds.iter().all(|k| allowed(predicate, k)) {
                    ok = false;
                }
            }
        });
        ok
    }
}

/// Calls `f` with every predicate of a pushed filter and the columns it reads.
fn visit_predicates(expr: &Expr, f: &mut dyn FnMut(Predicate, Vec<String>)) {
    let columns =
        |e: &Expr| -> Vec<String> { e.column_refs().iter().map(|c| c.name.clone()).collect() };
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And | Operator::Or => {
                visit_predicates(left, f);
                visit_predicates(right, f);
            }
            Operator::IsDistinctFrom | Operator::IsNotDistinctFrom => {
                f(Predicate::Distinct, columns(expr))
            }
            _ => f(Predicate::Compare, columns(expr)),
        },
        Expr::Not(inner) => visit_predicates(inner, f),
        Expr::IsNull(_) | Expr::IsNotNull(_) => f(Predicate::NullTest, columns(expr)),
        Expr::IsTrue(inner)
        | Expr::IsFalse(inner)
        | Expr::IsNotTrue(inner)
        | Expr::IsNotFalse(inner) => {
            f(Predicate::TruthTest, columns(expr));
            visit_predicates(inner, f);
        }
        Expr::Between(Between { .. }) => f(Predicate::Between, columns(expr)),
        Expr::InList(InList { .. }) => f(Predicate::InList, columns(expr)),
        Expr::Like(Like {
            pattern,
            escape_char,
            case_insensitive,
            ..
        }) => {
            let predicate = if *case_insensitive {
                Predicate::ILike
            } else if escape_char.is_some() || has_backslash(pattern) {
                Predicate::LikeEscaped
            } else {
                Predicate::Like
            };
            f(predicate, columns(expr))
        }
        Expr::Column(_) => f(Predicate::BoolColumn, columns(expr)),
        // Anything else reads no column or was not accepted by the scan.
        other => f(Predicate::Compare, columns(other)),
    }
}

fn has_backslash(pattern: &Expr) -> bool {
    match pattern {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => s.contains('\\'),
        Expr::Literal(..) => false,
        // Not a literal: assume the worst.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field};
    use datafusion::prelude::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
        ])
    }

    fn indexes(pairs: &[(&str, IndexKind)]) -> ColumnIndexes {
        let mut by_column: HashMap<String, Vec<IndexKind>> = HashMap::new();
        for (c, k) in pairs {
            by_column.entry(c.to_string()).or_default().push(k.clone());
        }
        ColumnIndexes {
            by_column,
            ..ColumnIndexes::default()
        }
    }

    #[test]
    fn type_urls_map_to_kinds() {
        assert_eq!(
            IndexKind::from_type_url("/lance.index.pb.BTreeIndexDetails"),
            IndexKind::BTree
        );
        assert_eq!(
            IndexKind::from_type_url("/lance.index.pb.ZoneMapIndexDetails"),
            IndexKind::ZoneMap
        );
        assert!(matches!(
            IndexKind::from_type_url("/lance.index.pb.FutureIndexDetails"),
            IndexKind::Other(_)
        ));
        // As a LanceDB service lists them: the type URL wins, else the name.
        let listed = |t: &str| IndexKind::listed(Some(t), None);
        assert_eq!(listed("BTREE"), IndexKind::BTree);
        assert_eq!(listed("BTree"), IndexKind::BTree);
        assert_eq!(listed("LABEL_LIST"), IndexKind::LabelList);
        assert_eq!(listed("FTS"), IndexKind::Inverted);
        assert_eq!(listed("IVF_PQ"), IndexKind::Other("IVFPQ".to_string()));
        assert_eq!(
            IndexKind::listed(Some("BTREE"), Some("/lance.index.pb.BitmapIndexDetails")),
            IndexKind::Bitmap
        );
        assert!(matches!(IndexKind::listed(None, None), IndexKind::Other(_)));
    }

    #[test]
    fn unsafe_pairs_stay_in_datafusion() {
        let s = schema();
        let btree = indexes(&[("s", IndexKind::BTree), ("b", IndexKind::Bitmap)]);
        assert!(btree.allows(&col("s").like(lit("Ab%")), &s));
        assert!(!btree.allows(&col("s").like(lit("Ab\\1%")), &s));
        assert!(!btree.allows(&col("i").gt(lit(1)).or(col("s").like(lit("\\%"))), &s));
        assert!(btree.allows(&col("s").ilike(lit("a\\b%")), &s));
        assert!(!btree.allows(&!col("b").is_true(), &s));
        assert!(btree.allows(&!col("b"), &s));
        // columns without an index are not restricted
        assert!(btree.allows(&col("i").is_true(), &s));
        let floats = indexes(&[("f", IndexKind::BTree)]);
        assert!(!floats.allows(&col("f").gt(lit(1.5)), &s));
        let unknown = indexes(&[("i", IndexKind::Other("fm".into()))]);
        assert!(!unknown.allows(&col("i").eq(lit(1)), &s));
        let unreadable = ColumnIndexes {
            unreadable: true,
            ..ColumnIndexes::default()
        };
        assert!(!unreadable.allows(&col("i").eq(lit(1)), &s));
        assert!(unreadable.covers("i"));
    }
}
