//! Nearest-neighbour `ORDER BY`: a query ending in
//!
//! ```sql
//! SELECT ... FROM t [WHERE ...] ORDER BY l2_distance(v, [0.1, ...]) LIMIT 10
//! ```
//!
//! on a Lance table whose vector column `v` has an ANN index of the metric
//! the function computes reads the `k` rows from the index, as
//! `lance_vector_search('t', 'v', [0.1, ...], 10)` does, instead of computing
//! the distance of every row. DataFusion still computes the distances and
//! sorts the `k` rows it gets, so the query's columns and order are its own.
//!
//! | `ORDER BY` | index metric |
//! |---|---|
//! | `l2_distance(v, q)` or `array_distance(v, q)` ascending | `l2` |
//! | `cosine_distance(v, q)` ascending | `cosine` |
//! | `dot_product(v, q)` / `inner_product(v, q)` descending | `dot` |
//!
//! The rewrite applies only where the answer can differ from the exact one
//! by the index's approximation alone: one sort key, a `LIMIT`, a constant
//! query vector of the column's dimension, rows with a NULL distance sorted
//! last (or a `NOT NULL` column), nothing but projections between the sort
//! and the scan, and every filter one Lance evaluates before the search with
//! DataFusion's semantics (the scan's pushdown rules). Anything else, a
//! column without such an index or `SET lance.use_vector_index = false`,
//! and DataFusion sorts every row exactly. One more difference is Lance's:
//! a search returns only rows with a distance, where an exact sort returns
//! rows with a NULL one (no vector) last — the answers differ there only
//! when fewer than `k` rows have a distance.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema};
use datafusion::datasource::{DefaultTableSource, TableProvider, provider_as_source};
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, LogicalPlan, Sort, TableScan};
use lance::Dataset;
use lance::index::DatasetIndexExt;
use lance_linalg::distance::DistanceType;
use prost::Message;

use crate::config::LanceConfig;
use crate::physical_plan::search::DISTANCE_COLUMN;
use crate::physical_plan::{Metric, VectorQuery};
use crate::table::LanceTableProvider;
use crate::table::index_rules::ColumnIndexes;
use crate::table::lookup::Target;
use crate::table::statement::StatementTable;
use crate::udtf::search::check_prefilter;
use crate::udtf::search::vector::{QueryVector, VECTOR_SEARCH_FUNCTION_NAME, VectorSearch, floats};

/// `plan` with every nearest-neighbour `ORDER BY ... LIMIT` a vector index
/// can answer reading from it (see the module docs). `plan`'s Lance tables
/// are fixed to the statement's versions already.
pub(crate) async fn use_vector_indexes(
    plan: LogicalPlan,
    state: &SessionState,
) -> DFResult<LogicalPlan> {
    if !LanceConfig::from_options(state.config_options()).use_vector_index {
        return Ok(plan);
    }
    let mut candidates = Vec::new();
    plan.apply_with_subqueries(|node| {
        if let LogicalPlan::Sort(sort) = node
            && let Some(candidate) = Candidate::of(sort)
        {
            candidates.push(candidate);
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    let mut usable = Vec::new();
    for candidate in candidates {
        if candidate.indexed(state).await? {
            usable.push(candidate);
        }
    }
    if usable.is_empty() {
        return Ok(plan);
    }
    plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::Sort(sort) => match Candidate::of(&sort) {
            Some(candidate) if usable.contains(&candidate) => candidate.rewrite(sort),
            _ => Ok(Transformed::no(LogicalPlan::Sort(sort))),
        },
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// A sort a vector search may answer: its scan, and the search.
struct Candidate {
    table: Arc<LanceTableProvider>,
    /// The scanned provider (identifies the scan to replace).
    source: usize,
    column: String,
    vector: Vec<f32>,
    metric: Metric,
    k: usize,
    /// The scan's pushed filters: the search's prefilter.
    filters: Vec<Expr>,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
            && self.column == other.column
            && self.vector == other.vector
            && self.metric == other.metric
            && self.k == other.k
            && self.filters == other.filters
    }
}

impl Candidate {
    /// The search `sort` amounts to, if it has the shape the module docs
    /// describe (the index is checked by [`Self::indexed`]).
    fn of(sort: &Sort) -> Option<Self> {
        let k = sort.fetch?;
        let [key] = sort.expr.as_slice() else {
            return None;
        };
        let mut expr = key.expr.clone().unalias();
        let mut node = sort.input.as_ref();
        let scan = loop {
            match node {
                LogicalPlan::Projection(p) => {
                    expr = substitute(expr, &p.schema, |i| p.expr[i].clone().unalias())?;
                    node = p.input.as_ref();
                }
                LogicalPlan::SubqueryAlias(a) => {
                    let input = a.input.schema();
                    expr = substitute(expr, &a.schema, |i| {
                        Expr::Column(Column::from(input.qualified_field(i)))
                    })?;
                    node = a.input.as_ref();
                }
                LogicalPlan::TableScan(scan) => break scan,
                _ => return None,
            }
        };
        if scan.fetch.is_some() {
            return None;
        }
        let source = scan.source.downcast_ref::<DefaultTableSource>()?;
        let provider: Arc<dyn TableProvider> = Arc::clone(&source.table_provider);
        let any: Arc<dyn Any + Send + Sync> = provider;
        let table = any.downcast::<LanceTableProvider>().ok()?;
        // The search adds `_distance`: a table with a column of that name
        // is sorted exactly (Lance could not merge the two).
        if table.has_row_columns() || table.schema().field_with_name(DISTANCE_COLUMN).is_ok() {
            return None;
        }
        let Expr::ScalarFunction(function) = expr else {
            return None;
        };
        let (metric, ascending) = match function.name() {
            "l2_distance" | "array_distance" => (Metric::L2, true),
            "cosine_distance" => (Metric::Cosine, true),
            "inner_product" => (Metric::Dot, false),
            _ => return None,
        };
        if key.asc != ascending {
            return None;
        }
        let (column, vector) = match function.args.as_slice() {
            [a, b] => match (vector_column(a), literal_vector(b)) {
                (Some(c), Some(v)) => (c, v),
                _ => (vector_column(b)?, literal_vector(a)?),
            },
            _ => return None,
        };
        let field = table.schema().field_with_name(&column).ok()?.clone();
        match field.data_type() {
            DataType::FixedSizeList(item, dim)
                if item.data_type().is_floating() && *dim as usize == vector.len() => {}
            _ => return None,
        }
        // Rows without a vector have no distance: exact sorting puts them
        // last, a search returns none.
        if key.nulls_first && field.is_nullable() {
            return None;
        }
        Some(Self {
            source: Arc::as_ptr(&source.table_provider) as *const () as usize,
            table,
            column,
            vector,
            metric,
            k,
            filters: scan.filters.clone(),
        })
    }

    /// Whether this version of the table has a vector index on the column
    /// with the sort's metric, and Lance can apply the scan's filters
    /// before searching it.
    async fn indexed(&self, state: &SessionState) -> DFResult<bool> {
        let dataset = self.table.snapshot(state).await?;
        if vector_index_metric(&dataset, &self.column).await != Some(self.metric.lance()) {
            return Ok(false);
        }
        let Some(filter) = conjunction(self.filters.clone()) else {
            return Ok(true);
        };
        Ok(check_prefilter(
            VECTOR_SEARCH_FUNCTION_NAME,
            &filter,
            &ColumnIndexes::of(&dataset).await,
            &self.table.schema(),
            "",
        )
        .is_ok())
    }

    /// `sort` reading from the search instead of the table.
    fn rewrite(self, sort: Sort) -> DFResult<Transformed<LogicalPlan>> {
        let width = self.table.schema().fields().len();
        let search: Arc<dyn TableProvider> = StatementTable::provider(VectorSearch::new(
            self.table.name().to_string(),
            Target::Lance(Arc::clone(&self.table)),
            QueryVector::Literal(self.vector),
            VectorQuery {
                column: self.column,
                vector: vec![],
                k: self.k,
                metric: Some(self.metric),
                nprobes: None,
                refine_factor: None,
                ef: None,
                prefilter: true,
                use_index: true,
                filter: conjunction(self.filters).map(unqualified).transpose()?,
            },
        ));
        let source = self.source;
        let input = Arc::unwrap_or_clone(sort.input).transform_up(|node| match node {
            LogicalPlan::TableScan(scan) if scanned(&scan) == Some(source) => {
                Ok(Transformed::yes(LogicalPlan::TableScan(TableScan {
                    source: provider_as_source(Arc::clone(&search)),
                    projection: Some(scan.projection.unwrap_or_else(|| (0..width).collect())),
                    filters: vec![],
                    ..scan
                })))
            }
            other => Ok(Transformed::no(other)),
        })?;
        Ok(Transformed::yes(LogicalPlan::Sort(Sort {
            input: Arc::new(input.data),
            ..sort
        })))
    }
}

/// `expr` with its columns named as Lance knows them: by name alone.
fn unqualified(expr: Expr) -> DFResult<Expr> {
    expr.transform(|e| match e {
        Expr::Column(c) => Ok(Transformed::yes(Expr::Column(Column::new_unqualified(
            c.name,
        )))),
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// The provider a scan reads, as an identity.
fn scanned(scan: &TableScan) -> Option<usize> {
    let source = scan.source.downcast_ref::<DefaultTableSource>()?;
    Some(Arc::as_ptr(&source.table_provider) as *const () as usize)
}

/// `expr` over a node's output (`schema`) rewritten over its input: the
/// column at index `i` becomes `input(i)`.
fn substitute(expr: Expr, schema: &DFSchema, input: impl Fn(usize) -> Expr) -> Option<Expr> {
    expr.transform(|e| match e {
        Expr::Column(c) => match schema.index_of_column(&c) {
            Ok(i) => Ok(Transformed::yes(input(i))),
            Err(e) => Err(e),
        },
        other => Ok(Transformed::no(other)),
    })
    .ok()
    .map(|t| t.data)
}

/// The column `expr` reads, through the casts the distance functions add.
fn vector_column(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Column(c) => Some(c.name.clone()),
        Expr::Cast(c) => vector_column(&c.expr),
        Expr::TryCast(c) => vector_column(&c.expr),
        _ => None,
    }
}

/// The query vector of a constant argument (folded by the optimizer).
fn literal_vector(expr: &Expr) -> Option<Vec<f32>> {
    match expr {
        Expr::Literal(value, _) => floats(value),
        _ => None,
    }
}

/// The metric of `column`'s vector index in `dataset`, if it has one that
/// records it.
async fn vector_index_metric(dataset: &Dataset, column: &str) -> Option<DistanceType> {
    let field = dataset.schema().field(column)?.id;
    let indices = dataset.load_indices().await.ok()?;
    indices.iter().find_map(|index| {
        let details = index.index_details.as_ref()?;
        // Empty details: an index older than Lance records metrics in.
        if index.fields.first() != Some(&field)
            || !details.type_url.ends_with("VectorIndexDetails")
            || details.value.is_empty()
        {
            return None;
        }
        let details = lance_index::pb::VectorIndexDetails::decode(details.value.as_slice()).ok()?;
        let metric = lance_index::pb::VectorMetricType::try_from(details.metric_type).ok()?;
        Some(match metric {
            lance_index::pb::VectorMetricType::L2 => DistanceType::L2,
            lance_index::pb::VectorMetricType::Cosine => DistanceType::Cosine,
            lance_index::pb::VectorMetricType::Dot => DistanceType::Dot,
            _ => return None,
        })
    })
}
