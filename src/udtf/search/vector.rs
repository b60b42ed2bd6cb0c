//! `lance_vector_search('<table>', '<vector column>', <query vector>, <k>
//! [, '<option>=<value>' ...])`: the table's columns plus `_distance` for
//! the `k` rows nearest to the query vector, nearest first — Lance's
//! `Scanner::nearest`, with the column's ANN index when it has one.
//!
//! The query vector is an array literal (`[0.1, 0.2, ...]`) or a scalar
//! subquery returning one (evaluated once, when the statement is planned).
//! Options:
//!
//! | option | meaning |
//! |---|---|
//! | `metric=l2\|cosine\|dot` | the distance (the index's, or `l2`, by default) |
//! | `nprobes=<n>` | IVF partitions probed (Lance's adaptive default otherwise) |
//! | `refine_factor=<n>` | re-rank `k × n` candidates with exact distances |
//! | `ef=<n>` | HNSW search breadth |
//! | `use_index=true\|false` | `false`: exact search even with an index |
//! | `filter=<SQL predicate>` | rows the search considers, planned by DataFusion |
//! | `prefilter=true\|false` | `true` (default): filter, then search (`k` matching rows); `false`: search, then filter (fewer rows may remain) |
//!
//! A prefilter is evaluated by Lance, so it must be one Lance answers with
//! DataFusion's semantics (the pushdown rules of [`crate::table`]); any
//! other is an error that says to use a postfilter or `WHERE`. A `WHERE`
//! on the function's result filters the `k` rows found, as SQL says.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::TreeNode;
use datafusion::dataframe::DataFrame;
use datafusion::datasource::{TableProvider, source_as_provider};
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::physical_plan::ExecutionPlan;
use lance::Dataset;

use super::{
    CloudPrefilter, check_prefilter, cloud_prefilter, lookup, parse_filter, plan_cloud_search,
    plan_search, string, with_extra,
};
use crate::config::parse_bool;
use crate::error::{Error, fail};
use crate::physical_plan::RELEVANCE_COLUMN;
use crate::physical_plan::search::{DISTANCE_COLUMN, SCORE_COLUMN, distance_field};
use crate::physical_plan::{Metric, SearchQuery, VectorQuery};
use crate::table::index_rules::ColumnIndexes;
use crate::table::lookup::Target;
use crate::table::statement::{Pinner, Statement, StatementTable, statement};
use datafusion::common::internal_err;

/// SQL name of the vector-search function.
pub const VECTOR_SEARCH_FUNCTION_NAME: &str = "lance_vector_search";

/// `lance_vector_search(...)`.
#[derive(Debug, Default)]
pub struct VectorSearchFunction {}

fn usage() -> String {
    format!(
        "usage: {VECTOR_SEARCH_FUNCTION_NAME}('<table>', '<vector column>', <query vector>, <k> \
         [, '<option>=<value>' ...])"
    )
}

/// The floats of a list literal.
pub(crate) fn floats(value: &ScalarValue) -> Option<Vec<f32>> {
    if value.is_null() {
        return None;
    }
    let list = match value {
        ScalarValue::List(a) => a.value(0),
        ScalarValue::LargeList(a) => a.value(0),
        ScalarValue::FixedSizeList(a) => a.value(0),
        _ => return None,
    };
    if list.null_count() > 0 || !list.data_type().is_numeric() {
        return None;
    }
    let list = cast(&list, &DataType::Float32).ok()?;
    Some(list.as_primitive::<Float32Type>().values().to_vec())
}

/// The query vector as written.
#[derive(Debug, Clone)]
pub(crate) enum QueryVector {
    /// An array literal.
    Literal(Vec<f32>),
    /// A scalar subquery, evaluated when the statement is planned.
    Subquery(Arc<LogicalPlan>),
}

impl TableFunctionImpl for VectorSearchFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        if exprs.len() < 4 {
            return fail!(
                invalid_input,
                "{VECTOR_SEARCH_FUNCTION_NAME} takes at least 4 arguments; {}",
                usage()
            );
        }
        let mut search = VectorSearch::from_args(
            VECTOR_SEARCH_FUNCTION_NAME,
            [&exprs[0], &exprs[1], &exprs[2], &exprs[3]],
            args.session(),
        )?;
        for option in &exprs[4..] {
            let Some(option) = string(option) else {
                return fail!(
                    invalid_input,
                    "{VECTOR_SEARCH_FUNCTION_NAME}: options are strings; {}",
                    usage()
                );
            };
            search.set(option, args.session())?;
        }
        Ok(StatementTable::provider(search))
    }
}

/// The columns `function` (`lance_vector_search` or `lance_hybrid_search`)
/// adds to the table's.
fn added_columns(function: &str) -> &'static [&'static str] {
    if function == super::hybrid::HYBRID_SEARCH_FUNCTION_NAME {
        &[DISTANCE_COLUMN, SCORE_COLUMN, RELEVANCE_COLUMN]
    } else {
        &[DISTANCE_COLUMN]
    }
}

/// A `lance_vector_search(...)` call: a table whose scan plans a
/// [`crate::physical_plan::LanceSearchExec`].
pub(crate) struct VectorSearch {
    /// The SQL function planning it (named in errors).
    pub(crate) function: &'static str,
    /// The table as the query names it.
    pub(crate) name: String,
    pub(crate) table: Target,
    pub(crate) vector: QueryVector,
    /// Everything but the vector (filled in when planned).
    pub(crate) query: VectorQuery,
    pub(crate) schema: SchemaRef,
}

impl fmt::Debug for VectorSearch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorSearch")
            .field("name", &self.name)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

impl VectorSearch {
    /// The search `query` (its vector from `vector`) on `table`, called
    /// `name` in the query.
    pub(crate) fn new(
        name: String,
        table: Target,
        vector: QueryVector,
        query: VectorQuery,
    ) -> Self {
        let schema = with_extra(&table.schema(), vec![distance_field()]);
        Self {
            function: VECTOR_SEARCH_FUNCTION_NAME,
            name,
            table,
            vector,
            query,
            schema,
        }
    }

    /// The search the first four arguments of `function` ask for (table,
    /// column, query vector, k), before options.
    pub(crate) fn from_args(
        function: &'static str,
        [table, column, vector, k]: [&Expr; 4],
        session: &dyn Session,
    ) -> DFResult<Self> {
        let (Some(name), Some(column)) = (string(table), string(column)) else {
            return fail!(
                invalid_input,
                "{function}: the table and the vector column are strings"
            );
        };
        let table = lookup(function, session, name, added_columns(function))?;
        let schema = table.schema();
        let dim = match schema.field_with_name(column).map(|f| f.data_type()) {
            Ok(DataType::FixedSizeList(item, dim)) if item.data_type().is_floating() => *dim,
            Ok(other) => {
                return fail!(
                    schema_mismatch,
                    "{function}: column '{column}' of '{name}' is {other}, \
                     not a vector (a fixed-size list of floats)"
                );
            }
            Err(_) => {
                return fail!(not_found, "{function}: '{name}' has no column '{column}'");
            }
        };
        let vector = match vector {
            Expr::Literal(value, _) => match floats(value) {
                Some(v) => {
                    check_dimension(function, &v, name, column, dim)?;
                    QueryVector::Literal(v)
                }
                None => {
                    return fail!(
                        invalid_input,
                        "{function}: the query vector must be an array of \
                         numbers without NULLs; got {value}"
                    );
                }
            },
            Expr::ScalarSubquery(subquery) => QueryVector::Subquery(Arc::clone(&subquery.subquery)),
            other => {
                return fail!(
                    invalid_input,
                    "{function}: the query vector must be an array literal or \
                     a scalar subquery; got {other}"
                );
            }
        };
        let k = match k {
            Expr::Literal(v, _) if v.data_type().is_integer() => {
                match v
                    .cast_to(&DataType::Int64)
                    .unwrap_or(ScalarValue::Int64(None))
                {
                    ScalarValue::Int64(Some(k)) if k > 0 => k as usize,
                    _ => {
                        return fail!(
                            invalid_input,
                            "{function}: k must be a positive integer; got {v}"
                        );
                    }
                }
            }
            other => {
                return fail!(
                    invalid_input,
                    "{function}: k must be an integer; got {other}"
                );
            }
        };
        let mut search = VectorSearch::new(
            name.to_string(),
            table,
            vector,
            VectorQuery {
                column: column.to_string(),
                vector: vec![],
                k,
                metric: None,
                nprobes: None,
                refine_factor: None,
                ef: None,
                prefilter: true,
                use_index: true,
                filter: None,
            },
        );
        search.function = function;
        Ok(search)
    }

    pub(crate) fn set(&mut self, option: &str, session: &dyn Session) -> DFResult<()> {
        let function = self.function;
        let Some((key, value)) = option.split_once('=') else {
            return Err(unknown(option).into());
        };
        let (key, value) = (key.trim(), value.trim());
        let count = |value: &str| match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Error::invalid_option(
                key,
                value,
                "must be a positive integer",
            )),
        };
        let q = &mut self.query;
        match key {
            "metric" => {
                q.metric = Some(Metric::parse(value).ok_or_else(|| {
                    Error::invalid_option(key, value, "must be 'l2', 'cosine' or 'dot'")
                })?)
            }
            "nprobes" => q.nprobes = Some(count(value)?),
            "refine_factor" => {
                q.refine_factor = Some(
                    u32::try_from(count(value)?)
                        .map_err(|_| Error::invalid_option(key, value, "is too large"))?,
                )
            }
            "ef" => q.ef = Some(count(value)?),
            "use_index" => q.use_index = parse_bool(key, value)?,
            "prefilter" => q.prefilter = parse_bool(key, value)?,
            "filter" => q.filter = Some(parse_filter(function, session, &self.table, value)?),
            _ => return Err(unknown(option).into()),
        }
        Ok(())
    }

    /// The query to run on `dataset` (the statement's version): its vector
    /// evaluated and checked, a prefilter checked (Lance must answer it with
    /// DataFusion's semantics), and the filter DataFusion applies to the `k`
    /// rows found (`prefilter=false`).
    pub(crate) async fn prepared(
        &self,
        state: &dyn Session,
        dataset: &Dataset,
    ) -> DFResult<(VectorQuery, Option<Expr>)> {
        let function = self.function;
        let table_schema = self.table.schema();
        let mut query = self.with_vector(state).await?;
        let postfilter = match query.filter.take() {
            Some(filter) if query.prefilter => {
                check_prefilter(
                    function,
                    &filter,
                    &ColumnIndexes::of(dataset).await,
                    &table_schema,
                    "use 'prefilter=false' (filter the k rows found) or filter in WHERE",
                )?;
                query.filter = Some(filter);
                None
            }
            other => other,
        };
        Ok((query, postfilter))
    }

    /// The query to send to the service (the statement's version of a
    /// `db://` table): its vector evaluated and checked, a prefilter as the
    /// Lance SQL it travels as (one the service answers with DataFusion's
    /// semantics), and the filter DataFusion applies to the `k` rows found
    /// (`prefilter=false`).
    pub(crate) async fn remote_prepared(
        &self,
        state: &dyn Session,
    ) -> DFResult<(VectorQuery, Option<CloudPrefilter>, Option<Expr>)> {
        let mut query = self.with_vector(state).await?;
        match query.filter.take() {
            Some(filter) if query.prefilter => {
                let sql = cloud_prefilter(
                    self.function,
                    &filter,
                    &self.table.schema(),
                    "use 'prefilter=false' (filter the k rows found) or filter in WHERE",
                )?;
                Ok((query, Some(sql), None))
            }
            postfilter => Ok((query, None, postfilter)),
        }
    }

    /// The query, its vector evaluated and of the column's dimension.
    async fn with_vector(&self, state: &dyn Session) -> DFResult<VectorQuery> {
        let mut query = self.query.clone();
        query.vector = self.vector(state).await?;
        if let Ok(DataType::FixedSizeList(_, dim)) = self
            .table
            .schema()
            .field_with_name(&query.column)
            .map(|f| f.data_type())
        {
            check_dimension(
                self.function,
                &query.vector,
                &self.name,
                &query.column,
                *dim,
            )?;
        }
        Ok(query)
    }

    /// The query vector: the literal, or the subquery's one value.
    async fn vector(&self, state: &dyn Session) -> DFResult<Vec<f32>> {
        let function = self.function;
        let plan = match &self.vector {
            QueryVector::Literal(v) => return Ok(v.clone()),
            QueryVector::Subquery(plan) => plan,
        };
        let Some(state) = state.as_any().downcast_ref::<SessionState>() else {
            return internal_err!("{function}: subqueries need a SessionState");
        };
        // The subquery runs when the statement is planned (EXPLAIN too):
        // never one that changes a table.
        if changes_tables(plan) {
            return fail!(
                not_supported,
                "{function}: the query vector subquery must only read; it \
                 runs when the statement is planned"
            );
        }
        let batches = DataFrame::new(state.clone(), plan.as_ref().clone())
            .collect()
            .await?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let value = match (rows, batches.iter().find(|b| b.num_rows() > 0)) {
            (1, Some(batch)) if batch.num_columns() == 1 => {
                ScalarValue::try_from_array(batch.column(0), 0)?
            }
            _ => {
                return fail!(
                    invalid_input,
                    "{function}: the query vector subquery returned {rows} \
                     rows; it must return one vector"
                );
            }
        };
        let wrapped = match &value {
            ScalarValue::List(_) | ScalarValue::LargeList(_) | ScalarValue::FixedSizeList(_) => {
                floats(&value)
            }
            _ => None,
        };
        if value.is_null() {
            return fail!(
                invalid_input,
                "{function}: the query vector subquery returned NULL"
            );
        }
        wrapped.ok_or_else(|| {
            Error::invalid_input(format!(
                "{function}: the query vector subquery returned {value}, not \
                 an array of numbers without NULLs"
            ))
            .into()
        })
    }
}

fn unknown(option: &str) -> Error {
    Error::UnknownOption {
        key: option.to_string(),
        hint: format!(
            " for {VECTOR_SEARCH_FUNCTION_NAME}: use 'metric=', 'nprobes=', 'refine_factor=', \
             'ef=', 'use_index=', 'filter=' or 'prefilter='"
        ),
    }
}

impl VectorSearch {
    /// This search on `table` (pinned), its subquery vector fixed too.
    pub(crate) async fn pinned(&self, table: Target, pinner: &mut dyn Pinner) -> DFResult<Self> {
        let vector = match &self.vector {
            QueryVector::Subquery(plan) => {
                QueryVector::Subquery(Arc::new(pinner.plan(plan).await?))
            }
            literal => literal.clone(),
        };
        let mut pinned = Self::new(self.name.clone(), table, vector, self.query.clone());
        pinned.function = self.function;
        Ok(pinned)
    }
}

#[async_trait]
impl Statement for VectorSearch {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.scan(state, None).await
    }

    /// Reads only the projected columns.
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let table = match &self.table {
            Target::Lance(table) => table,
            Target::Cloud(table) => {
                let (query, filter, postfilter) = self.remote_prepared(state).await?;
                return plan_cloud_search(
                    state,
                    (&self.name, table),
                    projection,
                    (SearchQuery::Vector(query), filter),
                    vec![distance_field()],
                    postfilter,
                )
                .await;
            }
        };
        let dataset = table.snapshot(state).await?;
        let (query, postfilter) = self.prepared(state, &dataset).await?;
        plan_search(
            state,
            table,
            &dataset,
            projection,
            SearchQuery::Vector(query),
            vec![distance_field()],
            postfilter,
        )
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let table = pinner.target(&self.table).await?;
        Ok(Some(StatementTable::provider(
            self.pinned(table, pinner).await?,
        )))
    }
}

/// An error unless the query vector has the column's dimension.
fn check_dimension(
    function: &str,
    query: &[f32],
    table: &str,
    column: &str,
    dim: i32,
) -> Result<(), Error> {
    if query.len() == dim as usize {
        Ok(())
    } else {
        Err(Error::schema_mismatch(format!(
            "{function}: the query vector has {} dimensions; column \
             '{column}' of '{table}' holds {dim}",
            query.len()
        )))
    }
}

/// Whether `plan` scans a statement that changes a table (DML, a merge, a
/// maintenance function).
fn changes_tables(plan: &LogicalPlan) -> bool {
    plan.exists(|node| {
        Ok(match node {
            LogicalPlan::TableScan(scan) => source_as_provider(&scan.source)
                .ok()
                .and_then(|p| statement(p.as_ref()).map(|s| s.changes_tables()))
                .unwrap_or(false),
            LogicalPlan::Dml(_) | LogicalPlan::Copy(_) | LogicalPlan::Ddl(_) => true,
            _ => false,
        })
    })
    .unwrap_or(true)
}
