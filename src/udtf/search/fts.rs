//! `lance_fts('<table>', '<query>' [, '<option>=<value>' ...])`: the rows of
//! a Lance table matching a full-text query through its INVERTED index, with
//! `_score` (BM25, higher is better), best first — Lance's
//! `Scanner::full_text_search`.
//!
//! | option | meaning |
//! |---|---|
//! | `columns=<a>[,<b>...]` | the columns searched (every INVERTED-indexed column by default) |
//! | `limit=<n>` | at most `n` rows, best first (all matches by default) |
//! | `operator=or\|and` | any word (default) or every word must match |
//! | `fuzziness=<n>\|auto` | edits allowed per word (0 by default; `auto`: Lance's by word length) |
//! | `phrase=true` | the words as a phrase, in order (the index needs `with_position = true`) |
//! | `filter=<SQL predicate>` | rows the search considers (a prefilter Lance evaluates; planned by DataFusion) |
//!
//! A column without an INVERTED index is an error naming it.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;
use lance::Dataset;

use super::{
    CloudPrefilter, check_prefilter, cloud_prefilter, lookup, parse_filter, plan_cloud_search,
    plan_search, string, with_extra,
};
use crate::config::parse_bool;
use crate::error::{Error, fail};
use crate::physical_plan::search::{SCORE_COLUMN, score_field};
use crate::physical_plan::{SearchQuery, TextQuery};
use crate::table::index_rules::{ColumnIndexes, IndexKind};
use crate::table::lookup::Target;
use crate::table::statement::{Pinner, Statement, StatementTable};

/// SQL name of the full-text search function.
pub const FTS_FUNCTION_NAME: &str = "lance_fts";

/// `lance_fts(...)`.
#[derive(Debug, Default)]
pub struct FtsFunction {}

impl TableFunctionImpl for FtsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        let usage =
            format!("usage: {FTS_FUNCTION_NAME}('<table>', '<query>' [, '<option>=<value>' ...])");
        let Some(strings) = exprs.iter().map(string).collect::<Option<Vec<&str>>>() else {
            return fail!(invalid_input, "{FTS_FUNCTION_NAME} takes strings; {usage}");
        };
        let [name, query, options @ ..] = strings.as_slice() else {
            return fail!(
                invalid_input,
                "{FTS_FUNCTION_NAME} needs a table and a query; {usage}"
            );
        };
        let table = lookup(FTS_FUNCTION_NAME, args.session(), name, &[SCORE_COLUMN])?;
        let mut search = FullTextSearch::new(
            name.to_string(),
            table,
            TextQuery {
                query: query.to_string(),
                columns: vec![],
                limit: None,
                all_words: false,
                fuzziness: Some(0),
                phrase: false,
                filter: None,
            },
        );
        for option in options {
            search.set(option, args.session())?;
        }
        Ok(StatementTable::provider(search))
    }
}

/// A `lance_fts(...)` call: a table whose scan plans a
/// [`crate::physical_plan::LanceSearchExec`].
pub(crate) struct FullTextSearch {
    /// The SQL function planning it (named in errors).
    pub(crate) function: &'static str,
    /// The table as the query names it.
    pub(crate) name: String,
    pub(crate) table: Target,
    pub(crate) query: TextQuery,
    schema: SchemaRef,
}

impl fmt::Debug for FullTextSearch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FullTextSearch")
            .field("name", &self.name)
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

impl FullTextSearch {
    /// `query` on `table`, called `name` in the statement.
    pub(crate) fn new(name: String, table: Target, query: TextQuery) -> Self {
        let schema = with_extra(&table.schema(), vec![score_field()]);
        Self {
            function: FTS_FUNCTION_NAME,
            name,
            table,
            query,
            schema,
        }
    }

    /// The query to run on `dataset` (the statement's version): its columns
    /// checked for INVERTED indexes, a phrase's column resolved, a filter
    /// checked (Lance must answer it with DataFusion's semantics).
    pub(crate) async fn prepared(&self, dataset: &Dataset) -> DFResult<TextQuery> {
        let function = self.function;
        let indexes = ColumnIndexes::of(dataset).await;
        let indexed = indexes.columns_with(&IndexKind::Inverted);
        let create = |column: &str| {
            format!(
                "CREATE INDEX {column}_fts ON {} USING INVERTED ({column})",
                self.name
            )
        };
        if let Some(missing) = self
            .query
            .columns
            .iter()
            .find(|c| !indexes.has(c, &IndexKind::Inverted))
        {
            return fail!(
                not_found,
                "{function}: column '{missing}' of '{}' has no INVERTED index; create \
                 one with {}",
                self.name,
                create(missing)
            );
        }
        if indexed.is_empty() {
            return fail!(
                not_found,
                "{function}: '{}' has no INVERTED index; create one with {}",
                self.name,
                create("<column>")
            );
        }
        if self.query.phrase && self.query.columns.len() > 1 {
            return fail!(invalid_input, "{function}: a phrase searches one column");
        }
        if let Some(filter) = &self.query.filter {
            check_prefilter(
                function,
                filter,
                &indexes,
                &self.table.schema(),
                "filter the results in WHERE instead",
            )?;
        }
        let mut query = self.query.clone();
        if query.phrase && query.columns.is_empty() {
            query.columns = indexed;
            if query.columns.len() > 1 {
                return fail!(
                    invalid_input,
                    "{function}: a phrase searches one column; name it with \
                     'columns=<column>'"
                );
            }
        }
        Ok(query)
    }

    /// The query to send to the service (a `db://` table, whose indexes
    /// the service checks): a phrase in one column at most, a number of
    /// edits (the service's query has no automatic fuzziness), a filter as
    /// the Lance SQL it travels as.
    pub(crate) fn remote_prepared(&self) -> DFResult<(TextQuery, Option<CloudPrefilter>)> {
        let function = self.function;
        if self.query.phrase && self.query.columns.len() > 1 {
            return fail!(invalid_input, "{function}: a phrase searches one column");
        }
        if self.query.fuzziness.is_none() {
            return fail!(
                not_supported,
                "{function}: 'fuzziness=auto' on '{}': the service's query has no automatic \
                 fuzziness; give a number of edits",
                self.name
            );
        }
        let mut query = self.query.clone();
        let filter = query
            .filter
            .take()
            .map(|filter| {
                cloud_prefilter(
                    function,
                    &filter,
                    &self.table.schema(),
                    "filter the results in WHERE instead",
                )
            })
            .transpose()?;
        Ok((query, filter))
    }

    pub(crate) fn set(&mut self, option: &str, session: &dyn Session) -> DFResult<()> {
        let function = self.function;
        let Some((key, value)) = option.split_once('=') else {
            return Err(unknown(option).into());
        };
        let (key, value) = (key.trim(), value.trim());
        let q = &mut self.query;
        match key {
            "columns" => {
                q.columns = value.split(',').map(|c| c.trim().to_string()).collect();
                let schema = self.table.schema();
                if let Some(missing) = q.columns.iter().find(|c| schema.index_of(c).is_err()) {
                    return fail!(
                        not_found,
                        "{function}: '{}' has no column '{missing}'",
                        self.name
                    );
                }
            }
            "limit" => match value.parse::<usize>() {
                Ok(n) if n > 0 => q.limit = Some(n),
                _ => {
                    return Err(
                        Error::invalid_option(key, value, "must be a positive integer").into(),
                    );
                }
            },
            "operator" => match value.to_ascii_lowercase().as_str() {
                "and" => q.all_words = true,
                "or" => q.all_words = false,
                _ => return Err(Error::invalid_option(key, value, "must be 'and' or 'or'").into()),
            },
            "fuzziness" => {
                q.fuzziness = match value.to_ascii_lowercase().as_str() {
                    "auto" => None,
                    n => Some(n.parse::<u32>().map_err(|_| {
                        Error::invalid_option(key, value, "must be a number of edits or 'auto'")
                    })?),
                }
            }
            "phrase" => q.phrase = parse_bool(key, value)?,
            "filter" => q.filter = Some(parse_filter(function, session, &self.table, value)?),
            _ => return Err(unknown(option).into()),
        }
        Ok(())
    }
}

fn unknown(option: &str) -> Error {
    Error::UnknownOption {
        key: option.to_string(),
        hint: format!(
            " for {FTS_FUNCTION_NAME}: use 'columns=', 'limit=', 'operator=', 'fuzziness=', \
             'phrase=' or 'filter='"
        ),
    }
}

impl FullTextSearch {
    /// This search on `table` (pinned).
    pub(crate) fn pinned(&self, table: Target) -> Self {
        let mut pinned = Self::new(self.name.clone(), table, self.query.clone());
        pinned.function = self.function;
        pinned
    }
}

#[async_trait]
impl Statement for FullTextSearch {
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
                let (query, filter) = self.remote_prepared()?;
                return plan_cloud_search(
                    state,
                    (&self.name, table),
                    projection,
                    (SearchQuery::FullText(query), filter),
                    vec![score_field()],
                    None,
                )
                .await;
            }
        };
        let dataset = table.snapshot(state).await?;
        let query = self.prepared(&dataset).await?;
        plan_search(
            state,
            table,
            &dataset,
            projection,
            SearchQuery::FullText(query),
            vec![score_field()],
            None,
        )
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let table = pinner.target(&self.table).await?;
        Ok(Some(StatementTable::provider(self.pinned(table))))
    }
}
