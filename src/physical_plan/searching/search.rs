//! [`LanceSearchExec`]: Lance's searches of one table version —
//! `Scanner::nearest` (the `k` rows nearest to a query vector, with the
//! column's ANN index when it has one and `use_index` is on, exactly
//! otherwise) and `Scanner::full_text_search` (rows matching a text query
//! through an INVERTED index, scored by BM25).

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Float32Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::common::internal_err;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use lance::dataset::scanner::Scanner;
use lance_index::scalar::FullTextSearchQuery;
use lance_index::scalar::inverted::query::{FtsQuery, MatchQuery, Operator, PhraseQuery};
use lance_linalg::distance::DistanceType;

use crate::error::Error;
use crate::location::{Snapshot, TableLocation};
use crate::physical_plan::hybrid::{HybridQuery, RELEVANCE_COLUMN, Ranked, fuse};
use crate::physical_plan::scan::conform;
use crate::session::LanceSessionCache;

/// The name of the distance column a vector search adds.
pub const DISTANCE_COLUMN: &str = "_distance";

/// The name of the relevance column a full-text search adds.
pub const SCORE_COLUMN: &str = "_score";

/// The `_distance` field.
pub(crate) fn distance_field() -> Field {
    Field::new(DISTANCE_COLUMN, DataType::Float32, true)
}

/// The `_score` field.
pub(crate) fn score_field() -> Field {
    Field::new(SCORE_COLUMN, DataType::Float32, true)
}

/// The `_relevance` field.
pub(crate) fn relevance_field() -> Field {
    Field::new(RELEVANCE_COLUMN, DataType::Float64, false)
}

/// A distance metric Lance searches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Squared Euclidean distance (`l2_distance`).
    L2,
    /// `1 - cosine similarity` (`cosine_distance`).
    Cosine,
    /// `1 - dot product`.
    Dot,
}

impl Metric {
    /// The metric's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Self::L2 => "l2",
            Self::Cosine => "cosine",
            Self::Dot => "dot",
        }
    }

    /// The metric called `name` (`l2` / `euclidean`, `cosine`, `dot`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "l2" | "euclidean" => Some(Self::L2),
            "cosine" => Some(Self::Cosine),
            "dot" => Some(Self::Dot),
            _ => None,
        }
    }

    pub(crate) fn lance(self) -> DistanceType {
        match self {
            Self::L2 => DistanceType::L2,
            Self::Cosine => DistanceType::Cosine,
            Self::Dot => DistanceType::Dot,
        }
    }
}

/// One nearest-neighbour query.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorQuery {
    /// The vector column searched.
    pub column: String,
    /// The query vector.
    pub vector: Vec<f32>,
    /// How many rows.
    pub k: usize,
    /// The metric; the index's (or L2 without one) when `None`.
    pub metric: Option<Metric>,
    /// IVF partitions probed (Lance's adaptive default when `None`).
    pub nprobes: Option<usize>,
    /// Re-rank `k × refine_factor` candidates with exact distances.
    pub refine_factor: Option<u32>,
    /// HNSW search breadth.
    pub ef: Option<usize>,
    /// Filter before the search (`true`) or after it (`false`: fewer than
    /// `k` rows may remain).
    pub prefilter: bool,
    /// Use the column's ANN index when it has one.
    pub use_index: bool,
    /// The filter Lance applies before the search (with `prefilter`), with
    /// DataFusion's semantics (the scan's pushdown rules).
    pub filter: Option<Expr>,
}

/// One full-text query.
#[derive(Debug, Clone, PartialEq)]
pub struct TextQuery {
    /// The words (or the phrase) searched for.
    pub query: String,
    /// The columns searched (every INVERTED-indexed column when empty).
    pub columns: Vec<String>,
    /// At most this many rows, best first (all matches when `None`).
    pub limit: Option<usize>,
    /// Every word must match (`AND`) rather than any (`OR`).
    pub all_words: bool,
    /// Edits allowed per word (`None`: Lance's automatic fuzziness).
    pub fuzziness: Option<u32>,
    /// The words as a phrase, in order.
    pub phrase: bool,
    /// Rows the search considers, evaluated by Lance with DataFusion's
    /// semantics.
    pub filter: Option<Expr>,
}

/// What a [`LanceSearchExec`] searches for.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchQuery {
    /// Nearest neighbours: the node adds `_distance`.
    Vector(VectorQuery),
    /// Full text: the node adds `_score`.
    FullText(TextQuery),
    /// Both, fused by reciprocal rank: the node adds `_distance`, `_score`
    /// and `_relevance`.
    Hybrid(Box<HybridQuery>),
}

/// A search of one snapshot (`lance_vector_search`, `lance_fts`): emits the
/// projected columns and `_distance` (nearest first) or `_score` (best
/// first) from one partition.
#[derive(Debug)]
pub struct LanceSearchExec {
    location: TableLocation,
    snapshot: Snapshot,
    columns: Vec<String>,
    query: SearchQuery,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl LanceSearchExec {
    /// Searches version `snapshot` of the table at `location`, returning
    /// `columns` and `_distance` or `_score` as `schema` says.
    pub fn new(
        location: TableLocation,
        snapshot: Snapshot,
        columns: Vec<String>,
        query: SearchQuery,
        schema: SchemaRef,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            location,
            snapshot,
            columns,
            query,
            schema,
            properties,
        }
    }

    /// Where the table lives.
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// The version searched.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The table columns returned (before `_distance`).
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The query.
    pub fn query(&self) -> &SearchQuery {
        &self.query
    }
}

impl DisplayAs for LanceSearchExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LanceSearchExec: uri={}, version={}, projection=[{}], ",
            self.location.display_uri,
            self.snapshot.version,
            self.columns.join(", ")
        )?;
        match &self.query {
            SearchQuery::Vector(q) => fmt_vector(q, f),
            SearchQuery::FullText(q) => fmt_text(q, f),
            SearchQuery::Hybrid(q) => {
                write!(f, "hybrid=[")?;
                fmt_vector(&q.vector, f)?;
                write!(f, "; ")?;
                fmt_text(&q.text, f)?;
                write!(f, "], rrf_k={}", q.rrf_k)
            }
        }
    }
}

pub(super) fn fmt_text(q: &TextQuery, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "full_text={:?}", q.query)?;
    if !q.columns.is_empty() {
        write!(f, ", columns=[{}]", q.columns.join(", "))?;
    }
    if let Some(n) = q.limit {
        write!(f, ", limit={n}")?;
    }
    if q.all_words {
        write!(f, ", operator=and")?;
    }
    if let Some(n) = q.fuzziness {
        write!(f, ", fuzziness={n}")?;
    }
    if q.phrase {
        write!(f, ", phrase=true")?;
    }
    if let Some(filter) = &q.filter {
        write!(f, ", prefilter={filter}")?;
    }
    Ok(())
}

pub(super) fn fmt_vector(q: &VectorQuery, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "nearest={}, k={}, dim={}", q.column, q.k, q.vector.len())?;
    if let Some(m) = q.metric {
        write!(f, ", metric={}", m.name())?;
    }
    if let Some(n) = q.nprobes {
        write!(f, ", nprobes={n}")?;
    }
    if let Some(r) = q.refine_factor {
        write!(f, ", refine_factor={r}")?;
    }
    if let Some(ef) = q.ef {
        write!(f, ", ef={ef}")?;
    }
    if !q.use_index {
        write!(f, ", use_index=false")?;
    }
    if let Some(filter) = &q.filter {
        write!(f, ", prefilter={filter}")?;
    }
    Ok(())
}

impl ExecutionPlan for LanceSearchExec {
    fn name(&self) -> &str {
        "LanceSearchExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("LanceSearchExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("LanceSearchExec has one partition, {partition} requested");
        }
        let (location, snapshot) = (self.location.clone(), self.snapshot.clone());
        let (columns, query) = (self.columns.clone(), self.query.clone());
        let schema = Arc::clone(&self.schema);
        let conform_to = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            let display = location.display_uri.clone();
            let lance_err = move |e| DataFusionError::from(Error::lance("searching", &display, e));
            let cache = LanceSessionCache::for_task(&context);
            let params = cache.params_for(&location);
            let dataset = cache
                .open_snapshot(&location.uri, &params, &snapshot)
                .await?;
            let rows = row_bound(&dataset).await.map_err(&lance_err)?;
            let query = bounded(&query, rows);
            let scanner = match &query {
                SearchQuery::Vector(q) => {
                    search_scanner(&dataset, &columns, DISTANCE_COLUMN, |s| nearest(s, q))
                }
                SearchQuery::FullText(q) => {
                    search_scanner(&dataset, &columns, SCORE_COLUMN, |s| full_text(s, q))
                }
                SearchQuery::Hybrid(q) => {
                    let batch = hybrid_search(&dataset, &columns, q, &conform_to)
                        .await
                        .map_err(&lance_err)
                        .and_then(|fused| conform(fused?, &conform_to));
                    return Ok(futures::stream::once(async { batch }).boxed());
                }
            }
            .map_err(&lance_err)?;
            let batches = scanner.try_into_stream().await.map_err(&lance_err)?;
            Ok::<_, DataFusionError>(
                batches
                    .map_err(lance_err)
                    .and_then(move |batch| futures::future::ready(conform(batch, &conform_to)))
                    .boxed(),
            )
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Both searches of `q` on `dataset` (concurrently), fused: `columns`,
/// `_distance`, `_score`, `_relevance` as `schema` says. Lance's errors
/// outside, fusion's inside.
async fn hybrid_search(
    dataset: &lance::Dataset,
    columns: &[String],
    q: &HybridQuery,
    schema: &SchemaRef,
) -> lance::Result<DFResult<RecordBatch>> {
    let run = |text: bool| async move {
        let scanner = if text {
            search_scanner(dataset, columns, SCORE_COLUMN, |s| {
                full_text(s.with_row_id(), &q.text)
            })
        } else {
            search_scanner(dataset, columns, DISTANCE_COLUMN, |s| {
                nearest(s.with_row_id(), &q.vector)
            })
        }?;
        let stream = scanner.try_into_stream().await?;
        let stream_schema = lance_io::stream::RecordBatchStream::schema(&stream);
        let batches: Vec<RecordBatch> = stream.try_collect().await?;
        Ok::<_, lance::Error>((stream_schema, batches))
    };
    let ((vector_schema, vector), (text_schema, text)) = futures::try_join!(run(false), run(true))?;
    Ok((|| {
        let vector = Ranked::new(&vector, &vector_schema, DISTANCE_COLUMN)?;
        let text = Ranked::new(&text, &text_schema, SCORE_COLUMN)?;
        fuse(&vector, &text, columns.len(), q.vector.k, q.rrf_k, schema)
    })())
}

/// At least as many rows as the version holds: its fragments' physical rows
/// (from the manifest), counted only for legacy fragments without them.
async fn row_bound(dataset: &lance::Dataset) -> lance::Result<usize> {
    let mut rows = 0usize;
    for fragment in dataset.fragments().iter() {
        rows = rows.saturating_add(match fragment.physical_rows {
            Some(n) => n,
            None => return dataset.count_rows(None).await,
        });
    }
    Ok(rows)
}

/// `query` with every number a caller supplied bounded by what a version
/// of `rows` rows can return, before Lance sees it: Lance sets up `k`
/// result slots, `k × refine_factor` candidates and `nprobes` partition
/// probes up front, and a huge value aborts the process. No answer
/// changes: no search returns more rows than the table has, and no IVF
/// index has more partitions than rows.
pub(crate) fn bounded(query: &SearchQuery, rows: usize) -> SearchQuery {
    let most = rows.max(1);
    let vector = |q: &VectorQuery| {
        let k = q.k.clamp(1, most);
        VectorQuery {
            k,
            nprobes: q.nprobes.map(|n| n.clamp(1, most)),
            // k × refine_factor candidates: never more than the rows.
            refine_factor: q
                .refine_factor
                .map(|r| r.clamp(1, u32::try_from(most.div_ceil(k)).unwrap_or(u32::MAX))),
            ef: q.ef.map(|ef| ef.clamp(1, most)),
            ..q.clone()
        }
    };
    let text = |q: &TextQuery| TextQuery {
        limit: q.limit.map(|n| n.clamp(1, most)),
        ..q.clone()
    };
    match query {
        SearchQuery::Vector(q) => SearchQuery::Vector(vector(q)),
        SearchQuery::FullText(q) => SearchQuery::FullText(text(q)),
        SearchQuery::Hybrid(q) => SearchQuery::Hybrid(Box::new(HybridQuery {
            vector: vector(&q.vector),
            text: text(&q.text),
            ..q.as_ref().clone()
        })),
    }
}

/// `columns` and then `extra`.
fn with(columns: &[String], extra: &str) -> Vec<String> {
    let mut all = columns.to_vec();
    all.push(extra.to_string());
    all
}

/// A scanner of `dataset` for `columns` and the `scoring` column (by name,
/// where the plan wants it: Lance's automatic scoring projection is
/// deprecated), configured by `search`.
fn search_scanner(
    dataset: &lance::Dataset,
    columns: &[String],
    scoring: &str,
    search: impl FnOnce(&mut Scanner) -> lance::Result<()>,
) -> lance::Result<Scanner> {
    let mut scanner = dataset.scan();
    scanner.disable_scoring_autoprojection();
    scanner.project(&with(columns, scoring))?;
    search(&mut scanner)?;
    Ok(scanner)
}

/// Configures `scanner` for a nearest-neighbour query.
fn nearest(scanner: &mut Scanner, q: &VectorQuery) -> lance::Result<()> {
    scanner.nearest(&q.column, &Float32Array::from(q.vector.clone()), q.k)?;
    if let Some(metric) = q.metric {
        scanner.distance_metric(metric.lance());
    }
    if let Some(n) = q.nprobes {
        scanner.nprobes(n);
    }
    if let Some(r) = q.refine_factor {
        scanner.refine(r);
    }
    if let Some(ef) = q.ef {
        scanner.ef(ef);
    }
    scanner.prefilter(q.prefilter).use_index(q.use_index);
    if let Some(filter) = &q.filter {
        scanner.filter_expr(filter.clone());
    }
    Ok(())
}

/// Configures `scanner` for a full-text query.
fn full_text(scanner: &mut Scanner, q: &TextQuery) -> lance::Result<()> {
    let columns = (!q.columns.is_empty()).then(|| q.columns.clone());
    let query: FtsQuery = if q.phrase {
        let mut phrase = PhraseQuery::new(q.query.clone());
        if let [column] = q.columns.as_slice() {
            phrase = phrase.with_column(Some(column.clone()));
        }
        phrase.into()
    } else {
        MatchQuery::new(q.query.clone())
            .with_fuzziness(q.fuzziness)
            .with_operator(if q.all_words {
                Operator::And
            } else {
                Operator::Or
            })
            .into()
    };
    let mut search = FullTextSearchQuery::new_query(query)
        .limit(q.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX)));
    if let Some(columns) = columns
        && !q.phrase
    {
        search = search.with_columns(&columns)?;
    }
    scanner.full_text_search(search)?;
    if let Some(filter) = &q.filter {
        scanner.prefilter(true).filter_expr(filter.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_round_trip_by_name() {
        for m in [Metric::L2, Metric::Cosine, Metric::Dot] {
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
        assert_eq!(Metric::parse("Euclidean"), Some(Metric::L2));
        assert_eq!(Metric::parse("hamming"), None);
    }
}
