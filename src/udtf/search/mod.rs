//! Search table functions: `lance_vector_search` ([`vector`]),
//! `lance_fts` ([`fts`]) and `lance_hybrid_search` ([`hybrid`]). Each takes
//! a registered Lance table and plans a [`LanceSearchExec`] on the
//! statement's version, or a `db://` table and plans a [`CloudSearchExec`]
//! the service answers; they share how options, filters and projections are
//! handled here.

pub(crate) mod fts;
pub(crate) mod hybrid;
pub(crate) mod vector;

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, TableReference};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use lance::Dataset;

pub(crate) use super::string;
use crate::cloud::{CloudClient, to_lance_sql};
use crate::error::{Error, fail};
use crate::location::{Snapshot, redact_uri};
use crate::physical_plan::cloud_search::{CloudSearchExec, CloudSearchParts};
use crate::physical_plan::inputs::project;
use crate::physical_plan::{LanceSearchExec, SearchQuery};
use crate::table::LanceTableProvider;
use crate::table::cloud::CloudTableProvider;
use crate::table::index_rules::ColumnIndexes;
use crate::table::lookup::{Target, registered_now};
use crate::table::pushdown;
use datafusion::common::internal_err;

/// The registered Lance or `db://` table `name` (see [`registered_now`]: a
/// table of a Lance catalog is looked up before `lance_sql` plans the
/// statement), which must not have a column called like one of the columns
/// `adds` (the function's rows hold the table's columns and those).
pub(crate) fn lookup(
    function: &str,
    session: &dyn Session,
    name: &str,
    adds: &[&str],
) -> DFResult<Target> {
    let reference = TableReference::from(name);
    match registered_now(session, &reference) {
        Ok(Some(table)) => {
            if let Some(column) = adds
                .iter()
                .find(|c| table.schema().field_with_name(c).is_ok())
            {
                return fail!(
                    invalid_input,
                    "{function}: table '{name}' has a column named '{column}', the name of the \
                     column {function} adds to its rows; rename the table's column to search it \
                     (ALTER TABLE {name} RENAME COLUMN {column} TO <another name>)"
                );
            }
            Ok(table)
        }
        Err(e) => Err(e.prefixed(function).into()),
        Ok(None) => fail!(
            not_found,
            "{function}: '{}' is not a registered Lance table; register the dataset first \
             (CREATE EXTERNAL TABLE <name> STORED AS LANCE LOCATION '...')",
            redact_uri(name)
        ),
    }
}

/// `schema` with `extras` (`_distance`, `_score`, `_relevance`) last.
pub(crate) fn with_extra(schema: &Schema, extras: Vec<Field>) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(extras);
    Arc::new(Schema::new(fields))
}

/// A `filter=<SQL>` option, planned by DataFusion against `table`'s columns.
pub(crate) fn parse_filter(
    function: &str,
    session: &dyn Session,
    table: &Target,
    sql: &str,
) -> DFResult<Expr> {
    let Some(state) = session.as_any().downcast_ref::<SessionState>() else {
        return internal_err!("{function}: filters need a SessionState");
    };
    let schema = DFSchema::try_from(table.schema().as_ref().clone())?;
    state
        .create_logical_expr(sql, &schema)
        .map_err(|e| Error::invalid_input(format!("{function}: filter '{sql}': {e}")).into())
}

/// An error unless Lance evaluates every conjunct of `filter` with
/// DataFusion's semantics given the version's `indexes` (the scan's pushdown
/// and index rules).
pub(crate) fn check_prefilter(
    function: &str,
    filter: &Expr,
    indexes: &ColumnIndexes,
    schema: &Schema,
    instead: &str,
) -> DFResult<()> {
    for conjunct in split_conjunction(filter) {
        if !pushdown::is_exact(conjunct, schema) || !indexes.allows(conjunct, schema) {
            return fail!(
                not_supported,
                "{function}: Lance cannot prefilter on '{conjunct}' with DataFusion's \
                 semantics; {instead}"
            );
        }
    }
    Ok(())
}

/// A prefilter of a search of a `db://` table that passed the scan's rule;
/// the service's indices are checked when the search is planned (see
/// [`plan_cloud_search`]).
pub(crate) struct CloudPrefilter {
    function: String,
    expr: Expr,
    /// The filter as the Lance SQL it travels as.
    sql: String,
    /// What to do instead, when the filter is refused.
    instead: String,
}

/// A prefilter of a search of a `db://` table: an error unless every
/// conjunct is one Lance evaluates with DataFusion's semantics (the rule of
/// the table's scans).
pub(crate) fn cloud_prefilter(
    function: &str,
    filter: &Expr,
    schema: &Schema,
    instead: &str,
) -> DFResult<CloudPrefilter> {
    for conjunct in split_conjunction(filter) {
        if !pushdown::is_exact(conjunct, schema) || to_lance_sql(conjunct).is_none() {
            return fail!(
                not_supported,
                "{function}: the service cannot prefilter on '{conjunct}' with DataFusion's \
                 semantics; {instead}"
            );
        }
    }
    let sql = to_lance_sql(filter).ok_or_else(|| {
        Error::not_supported(format!(
            "{function}: filter '{filter}' has no Lance SQL form"
        ))
    })?;
    Ok(CloudPrefilter {
        function: function.to_string(),
        expr: filter.clone(),
        sql,
        instead: instead.to_string(),
    })
}

impl CloudPrefilter {
    /// The Lance SQL to send, unless the service would answer a conjunct from
    /// an index whose semantics differ from DataFusion's.
    async fn checked(self, table: &CloudTableProvider, version: u64) -> DFResult<String> {
        let client = CloudClient::connect(table.cloud_table())?;
        let indexes = table.indexes(&client, version).await?;
        let schema = table.schema();
        if indexes.unreadable() {
            return fail!(
                not_supported,
                "{}: the service gave no index list for the table, so it cannot be checked \
                 that it answers the prefilter '{}' as DataFusion does; {}",
                self.function,
                self.expr,
                self.instead
            );
        }
        for conjunct in split_conjunction(&self.expr) {
            if !indexes.allows(conjunct, &schema) {
                let named: Vec<String> = conjunct
                    .column_refs()
                    .iter()
                    .flat_map(|c| indexes.names_on(&c.name).to_vec())
                    .collect();
                return fail!(
                    not_supported,
                    "{}: the service would answer the prefilter '{conjunct}' from the table's \
                     indices [{}], whose semantics differ from DataFusion's for it; {}",
                    self.function,
                    named.join(", "),
                    self.instead
                );
            }
        }
        Ok(self.sql)
    }
}

/// Which table columns a search node reads for a result projected as
/// `projection` (over the table's columns, then `extras`) and a
/// `postfilter`, and the node's schema (those columns, then `extras`).
struct Layout {
    read: Vec<usize>,
    wanted: Vec<usize>,
    first_extra: usize,
    columns: Vec<String>,
    node_schema: SchemaRef,
}

impl Layout {
    fn new(
        table_schema: &Schema,
        projection: Option<&Vec<usize>>,
        extras: Vec<Field>,
        postfilter: Option<&Expr>,
    ) -> DFResult<Self> {
        let first_extra = table_schema.fields().len();
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..first_extra + extras.len()).collect(),
        };
        let mut read: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|&i| i < first_extra)
            .collect();
        if let Some(filter) = postfilter {
            for c in filter.column_refs() {
                let i = table_schema.index_of(&c.name)?;
                if !read.contains(&i) {
                    read.push(i);
                }
            }
        }
        let columns: Vec<String> = read
            .iter()
            .map(|&i| table_schema.field(i).name().clone())
            .collect();
        let mut fields: Vec<Field> = read
            .iter()
            .map(|&i| table_schema.field(i).clone())
            .collect();
        fields.extend(extras);
        Ok(Self {
            read,
            wanted,
            first_extra,
            columns,
            node_schema: Arc::new(Schema::new(fields)),
        })
    }

    /// `node` (a search node of this layout) with `postfilter` applied and
    /// projected as asked.
    fn finish(
        self,
        state: &dyn Session,
        node: Arc<dyn ExecutionPlan>,
        postfilter: Option<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let mut plan = node;
        if let Some(filter) = postfilter {
            let df_schema = DFSchema::try_from(self.node_schema.as_ref().clone())?;
            let predicate = state.create_physical_expr(filter, &df_schema)?;
            plan = Arc::new(FilterExec::try_new(predicate, plan)?);
        }
        // From the node's order (read columns, then the extra ones) to the one asked.
        let order: Vec<usize> = self
            .wanted
            .iter()
            .map(|&i| {
                if i >= self.first_extra {
                    self.read.len() + (i - self.first_extra)
                } else {
                    self.read.iter().position(|&r| r == i).unwrap_or_default()
                }
            })
            .collect();
        project(plan, Some(&order))
    }
}

/// The plan of a search of `db://` table `table` (at the statement's
/// version): a [`CloudSearchExec`] the service answers, then as
/// [`plan_search`]. `filter` is the prefilter, in Lance SQL.
pub(crate) async fn plan_cloud_search(
    state: &dyn Session,
    (name, table): (&str, &CloudTableProvider),
    projection: Option<&Vec<usize>>,
    (query, filter): (SearchQuery, Option<CloudPrefilter>),
    extras: Vec<Field>,
    postfilter: Option<Expr>,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    let version = table.latest_version().await?;
    let filter = match filter {
        Some(filter) => Some(filter.checked(table, version).await?),
        None => None,
    };
    let layout = Layout::new(&table.schema(), projection, extras, postfilter.as_ref())?;
    let node = Arc::new(CloudSearchExec::new(CloudSearchParts {
        name: name.to_string(),
        table: table.cloud_table().clone(),
        version,
        columns: layout.columns.clone(),
        query,
        filter,
        schema: Arc::clone(&layout.node_schema),
    }));
    layout.finish(state, node, postfilter)
}

/// The plan of a search of `dataset` (the statement's version of `table`):
/// a [`LanceSearchExec`] reading the projected columns (and those of
/// `postfilter`, which DataFusion evaluates on its rows), then `extras`,
/// projected as `projection` asks (over the table's columns and `extras`).
pub(crate) fn plan_search(
    state: &dyn Session,
    table: &LanceTableProvider,
    dataset: &Dataset,
    projection: Option<&Vec<usize>>,
    query: SearchQuery,
    extras: Vec<Field>,
    postfilter: Option<Expr>,
) -> DFResult<Arc<dyn ExecutionPlan>> {
    // Tasks open the version by location: give them this table's store
    // parameters (object-store wrappers, credentials), as scans do.
    table
        .session_cache(state)
        .register_params(table.location(), table.store_params());
    let layout = Layout::new(&table.schema(), projection, extras, postfilter.as_ref())?;
    let node = Arc::new(LanceSearchExec::new(
        table.location().clone(),
        Snapshot::of(dataset),
        layout.columns.clone(),
        query,
        Arc::clone(&layout.node_schema),
    ));
    layout.finish(state, node, postfilter)
}
