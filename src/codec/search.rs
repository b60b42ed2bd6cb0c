//! Encoding of search queries (vector and full text), shared by the logical
//! and physical codecs.

use datafusion::error::Result as DFResult;
use datafusion::execution::TaskContext;
use datafusion_proto::logical_plan::from_proto::parse_expr;
use datafusion_proto::logical_plan::to_proto::serialize_expr;
use datafusion_proto::logical_plan::{DefaultLogicalExtensionCodec, LogicalExtensionCodec};

use super::{malformed, proto};
use crate::physical_plan::{HybridQuery, Metric, SearchQuery, TextQuery, VectorQuery};

pub(super) fn encode_query(
    query: &VectorQuery,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::VectorQuery> {
    Ok(proto::VectorQuery {
        column: query.column.clone(),
        vector: query.vector.clone(),
        k: query.k as u64,
        metric: query.metric.map(|m| m.name().to_string()),
        nprobes: query.nprobes.map(|n| n as u64),
        refine_factor: query.refine_factor,
        ef: query.ef.map(|n| n as u64),
        prefilter: query.prefilter,
        use_index: query.use_index,
        filter: query
            .filter
            .as_ref()
            .map(|f| serialize_expr(f, codec))
            .transpose()?,
    })
}

pub(super) fn decode_query(
    query: proto::VectorQuery,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<VectorQuery> {
    let size =
        |n: u64, what: &str| usize::try_from(n).map_err(|_| malformed(format!("{what} of {n}")));
    Ok(VectorQuery {
        column: query.column,
        vector: query.vector,
        k: size(query.k, "k")?,
        metric: query
            .metric
            .map(|m| Metric::parse(&m).ok_or_else(|| malformed(format!("metric '{m}'"))))
            .transpose()?,
        nprobes: query.nprobes.map(|n| size(n, "nprobes")).transpose()?,
        refine_factor: query.refine_factor,
        ef: query.ef.map(|n| size(n, "ef")).transpose()?,
        prefilter: query.prefilter,
        use_index: query.use_index,
        filter: query
            .filter
            .map(|f| parse_expr(&f, ctx, codec))
            .transpose()?,
    })
}

pub(super) fn encode_text(
    query: &TextQuery,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::TextQuery> {
    Ok(proto::TextQuery {
        query: query.query.clone(),
        columns: query.columns.clone(),
        limit: query.limit.map(|n| n as u64),
        all_words: query.all_words,
        fuzziness: query.fuzziness,
        phrase: query.phrase,
        filter: query
            .filter
            .as_ref()
            .map(|f| serialize_expr(f, codec))
            .transpose()?,
    })
}

pub(super) fn decode_text(
    query: proto::TextQuery,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<TextQuery> {
    Ok(TextQuery {
        query: query.query,
        columns: query.columns,
        limit: query
            .limit
            .map(|n| usize::try_from(n).map_err(|_| malformed(format!("limit of {n}"))))
            .transpose()?,
        all_words: query.all_words,
        fuzziness: query.fuzziness,
        phrase: query.phrase,
        filter: query
            .filter
            .map(|f| parse_expr(&f, ctx, codec))
            .transpose()?,
    })
}

pub(super) fn encode_hybrid(
    query: &HybridQuery,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<proto::HybridQuery> {
    Ok(proto::HybridQuery {
        vector: Some(encode_query(&query.vector, codec)?),
        text: Some(encode_text(&query.text, codec)?),
        rrf_k: query.rrf_k,
    })
}

pub(super) fn decode_hybrid(
    query: proto::HybridQuery,
    ctx: &TaskContext,
    codec: &dyn LogicalExtensionCodec,
) -> DFResult<HybridQuery> {
    let (Some(vector), Some(text)) = (query.vector, query.text) else {
        return Err(malformed("hybrid query without both halves"));
    };
    Ok(HybridQuery {
        vector: decode_query(vector, ctx, codec)?,
        text: decode_text(text, ctx, codec)?,
        rrf_k: query.rrf_k,
    })
}

/// One of a search node's three query fields, as `query` is.
pub(super) type QueryFields = (
    Option<proto::VectorQuery>,
    Option<proto::TextQuery>,
    Option<Box<proto::HybridQuery>>,
);

/// `query` in a search node's fields (its filters as DataFusion's).
pub(super) fn encode_search(query: &SearchQuery) -> DFResult<QueryFields> {
    let codec = DefaultLogicalExtensionCodec {};
    Ok(match query {
        SearchQuery::Vector(q) => (Some(encode_query(q, &codec)?), None, None),
        SearchQuery::FullText(q) => (None, Some(encode_text(q, &codec)?), None),
        SearchQuery::Hybrid(q) => (None, None, Some(Box::new(encode_hybrid(q, &codec)?))),
    })
}

/// The query of a search node's fields.
pub(super) fn decode_search(fields: QueryFields, ctx: &TaskContext) -> DFResult<SearchQuery> {
    let codec = DefaultLogicalExtensionCodec {};
    Ok(match fields {
        (Some(q), None, None) => SearchQuery::Vector(decode_query(q, ctx, &codec)?),
        (None, Some(q), None) => SearchQuery::FullText(decode_text(q, ctx, &codec)?),
        (None, None, Some(q)) => SearchQuery::Hybrid(Box::new(decode_hybrid(*q, ctx, &codec)?)),
        _ => return Err(malformed("search query")),
    })
}
