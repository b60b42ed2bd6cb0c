//! Table functions: `lance_cache_stats()`, `lance_versions('t')`,
//! `lance_fragments('t')`, `lance_tags('t')`, `lance_tag('t', ...)`,
//! `lance_indices('t')`, `lance_create_index('t', ...)`, `lance_drop_index('t', ...)`,
//! `lance_optimize('t')`, `lance_vacuum('t')`, `lance_vector_search('t', ...)`,
//! `lance_fts('t', ...)`, `lance_rows('t')`, `lance_build_permutation(...)`,
//! `lance_permutation(...)`.
//!
//! They only build providers in `call_with_args`; reads happen in `scan`.

pub(crate) mod cache_stats;
pub(crate) mod index;
pub(crate) mod metadata;
pub(crate) mod optimize;
pub(crate) mod permutation;
pub(crate) mod permutation_options;
pub(crate) mod rows;
pub(crate) mod search;
pub(crate) mod tag;
pub(crate) mod vacuum;

pub use cache_stats::{CACHE_STATS_FUNCTION_NAME, CacheStatsFunction};
pub use index::{CREATE_INDEX_FUNCTION_NAME, DROP_INDEX_FUNCTION_NAME, IndexFunction};
pub use metadata::{
    FRAGMENTS_FUNCTION_NAME, INDICES_FUNCTION_NAME, MetadataFunction, MetadataKind,
    TAGS_FUNCTION_NAME, VERSIONS_FUNCTION_NAME,
};
pub use optimize::{OPTIMIZE_FUNCTION_NAME, OptimizeFunction};
pub use permutation::{
    BUILD_PERMUTATION_FUNCTION_NAME, BuildPermutationFunction, PERMUTATION_FUNCTION_NAME,
    PermutationFunction,
};
pub use rows::{ROWS_FUNCTION_NAME, RowsFunction};
pub use search::fts::{FTS_FUNCTION_NAME, FtsFunction};
pub use search::hybrid::{HYBRID_SEARCH_FUNCTION_NAME, HybridSearchFunction};
pub use search::vector::{VECTOR_SEARCH_FUNCTION_NAME, VectorSearchFunction};
pub use tag::{TAG_FUNCTION_NAME, TagFunction};
pub use vacuum::{VACUUM_FUNCTION_NAME, VacuumFunction};

use datafusion::common::ScalarValue;
use datafusion::logical_expr::Expr;

/// The SQL names of every table function [`crate::register_lance`]
/// registers (`lance_as_of` and `lance_merge` are planned apart).
pub(crate) fn function_names() -> Vec<&'static str> {
    let mut names = vec![
        CACHE_STATS_FUNCTION_NAME,
        VACUUM_FUNCTION_NAME,
        FTS_FUNCTION_NAME,
        ROWS_FUNCTION_NAME,
        VECTOR_SEARCH_FUNCTION_NAME,
        HYBRID_SEARCH_FUNCTION_NAME,
        TAG_FUNCTION_NAME,
        CREATE_INDEX_FUNCTION_NAME,
        DROP_INDEX_FUNCTION_NAME,
        OPTIMIZE_FUNCTION_NAME,
        BUILD_PERMUTATION_FUNCTION_NAME,
        PERMUTATION_FUNCTION_NAME,
    ];
    names.extend(MetadataKind::ALL.map(MetadataKind::function_name));
    names
}

/// The string of a string literal argument.
pub(crate) fn string(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => Some(s),
        _ => None,
    }
}

/// Every argument as a string, or `None` when one is not a string literal.
pub(crate) fn string_args(exprs: &[Expr]) -> Option<Vec<String>> {
    exprs
        .iter()
        .map(|e| string(e).map(str::to_string))
        .collect()
}
