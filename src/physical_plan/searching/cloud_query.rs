//! Searches as the service's `query` requests: a nearest-neighbour search
//! carries the query vector and its options, a full-text search a
//! structured query (Lance's `match`, `multi_match` or `phrase`), both the
//! version, the columns and a prefilter in Lance SQL.

use lance_namespace::models;

use super::search::{TextQuery, VectorQuery};
use crate::error::{Error, Result};

/// What every search request names besides its query.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SearchScope<'a> {
    /// The version searched.
    pub version: u64,
    /// The columns returned (the score and `_rowid` come as asked).
    pub columns: &'a [String],
    /// The prefilter, in Lance SQL.
    pub filter: Option<&'a str>,
    /// Whether rows carry `_rowid` (what fusing two searches keys on).
    pub row_id: bool,
}

/// `n` as the 32-bit number the service's query holds.
fn small(what: &str, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| {
        Error::not_supported(format!(
            "{what} of {n} is beyond what the service's query holds (2^31 - 1)"
        ))
    })
}

fn scoped(
    mut request: models::QueryTableRequest,
    scope: SearchScope<'_>,
) -> models::QueryTableRequest {
    request.version = Some(scope.version as i64);
    request.filter = scope.filter.map(str::to_string);
    request.columns = Some(Box::new(models::QueryTableRequestColumns {
        column_names: Some(scope.columns.to_vec()),
        column_aliases: None,
    }));
    request.with_row_id = scope.row_id.then_some(true);
    request
}

/// The request of nearest-neighbour search `q` (its own `filter` is
/// unused: the scope's Lance SQL travels).
pub(crate) fn vector_request(
    q: &VectorQuery,
    scope: SearchScope<'_>,
) -> Result<models::QueryTableRequest> {
    let vector = models::QueryTableRequestVector {
        single_vector: Some(q.vector.clone()),
        multi_vector: None,
    };
    let mut request = models::QueryTableRequest::new(small("k", q.k)?, vector);
    request.vector_column = Some(q.column.clone());
    request.distance_type = q.metric.map(|m| m.name().to_string());
    request.nprobes = q.nprobes.map(|n| small("nprobes", n)).transpose()?;
    request.refine_factor = q
        .refine_factor
        .map(|r| small("refine_factor", r as usize))
        .transpose()?;
    request.ef = q.ef.map(|n| small("ef", n)).transpose()?;
    request.bypass_vector_index = (!q.use_index).then_some(true);
    request.prefilter = Some(q.prefilter);
    Ok(scoped(request, scope))
}

/// The request of full-text search `q`: `k` is its limit (0: every match).
pub(crate) fn text_request(
    q: &TextQuery,
    scope: SearchScope<'_>,
) -> Result<models::QueryTableRequest> {
    let Some(fuzziness) = q.fuzziness else {
        return Err(Error::not_supported(
            "'fuzziness=auto': the service's query has no automatic fuzziness; give a number \
             of edits",
        ));
    };
    let fuzziness = small("fuzziness", fuzziness as usize)?;
    let query = if q.phrase {
        models::FtsQuery {
            phrase: Some(Box::new(models::PhraseQuery {
                column: q.columns.first().cloned(),
                slop: None,
                terms: q.query.clone(),
            })),
            ..Default::default()
        }
    } else {
        let one = |column: Option<String>| models::MatchQuery {
            boost: None,
            column,
            fuzziness: Some(fuzziness),
            max_expansions: None,
            operator: Some(if q.all_words { "And" } else { "Or" }.to_string()),
            prefix_length: None,
            terms: q.query.clone(),
        };
        match q.columns.as_slice() {
            [] => models::FtsQuery {
                r#match: Some(Box::new(one(None))),
                ..Default::default()
            },
            [column] => models::FtsQuery {
                r#match: Some(Box::new(one(Some(column.clone())))),
                ..Default::default()
            },
            columns => models::FtsQuery {
                multi_match: Some(Box::new(models::MultiMatchQuery {
                    match_queries: columns.iter().map(|c| one(Some(c.clone()))).collect(),
                })),
                ..Default::default()
            },
        }
    };
    let limit = q.limit.map(|n| small("limit", n)).transpose()?.unwrap_or(0);
    let mut request = models::QueryTableRequest::new(limit, models::QueryTableRequestVector::new());
    request.full_text_query = Some(Box::new(models::QueryTableRequestFullTextQuery {
        string_query: None,
        structured_query: Some(Box::new(models::StructuredFtsQuery {
            query: Box::new(query),
        })),
    }));
    request.prefilter = scope.filter.map(|_| true);
    Ok(scoped(request, scope))
}
