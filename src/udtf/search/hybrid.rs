//! `lance_hybrid_search('<table>', '<vector column>', <query vector>,
//! '<text query>', <k> [, '<option>=<value>' ...])`: the `k` rows of a Lance
//! table most relevant to both a query vector and a text query — a
//! `lance_vector_search` and a `lance_fts` of the same version, `k` rows
//! each, fused by reciprocal rank (see [`crate::physical_plan::HybridQuery`]):
//! the table's columns, `_distance`, `_score` and `_relevance`, most relevant
//! first.
//!
//! | option | meaning |
//! |---|---|
//! | `metric=`, `nprobes=`, `refine_factor=`, `ef=`, `use_index=` | the vector search's, as in `lance_vector_search` |
//! | `columns=`, `operator=`, `fuzziness=`, `phrase=` | the text search's, as in `lance_fts` |
//! | `filter=<SQL predicate>` | rows both searches consider (a prefilter Lance evaluates; planned by DataFusion) |
//! | `rrf_k=<n>` | the constant in `1 / (n + rank)` (60 by default) |

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::internal_err;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::fts::FullTextSearch;
use super::vector::VectorSearch;
use super::{plan_cloud_search, plan_search, string, with_extra};
use crate::error::{Error, fail};
use crate::physical_plan::search::{distance_field, relevance_field, score_field};
use crate::physical_plan::{DEFAULT_RRF_K, HybridQuery, SearchQuery, TextQuery};
use crate::table::lookup::Target;
use crate::table::statement::{Pinner, Statement, StatementTable};

/// SQL name of the hybrid-search function.
pub const HYBRID_SEARCH_FUNCTION_NAME: &str = "lance_hybrid_search";

/// `lance_hybrid_search(...)`.
#[derive(Debug, Default)]
pub struct HybridSearchFunction {}

fn usage() -> String {
    format!(
        "usage: {HYBRID_SEARCH_FUNCTION_NAME}('<table>', '<vector column>', <query vector>, \
         '<text query>', <k> [, '<option>=<value>' ...])"
    )
}

impl TableFunctionImpl for HybridSearchFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let exprs = args.exprs();
        if exprs.len() < 5 {
            return fail!(
                invalid_input,
                "{HYBRID_SEARCH_FUNCTION_NAME} takes at least 5 arguments; {}",
                usage()
            );
        }
        let vector = VectorSearch::from_args(
            HYBRID_SEARCH_FUNCTION_NAME,
            [&exprs[0], &exprs[1], &exprs[2], &exprs[4]],
            args.session(),
        )?;
        let Some(query) = string(&exprs[3]) else {
            return fail!(
                invalid_input,
                "{HYBRID_SEARCH_FUNCTION_NAME}: the text query is a string; {}",
                usage()
            );
        };
        let mut text = FullTextSearch::new(
            vector.name.clone(),
            vector.table.clone(),
            TextQuery {
                query: query.to_string(),
                columns: vec![],
                limit: Some(vector.query.k),
                all_words: false,
                fuzziness: Some(0),
                phrase: false,
                filter: None,
            },
        );
        text.function = HYBRID_SEARCH_FUNCTION_NAME;
        let mut search = HybridSearch::new(vector, text, DEFAULT_RRF_K);
        for option in &exprs[5..] {
            let Some(option) = string(option) else {
                return fail!(
                    invalid_input,
                    "{HYBRID_SEARCH_FUNCTION_NAME}: options are strings; {}",
                    usage()
                );
            };
            search.set(option, args.session())?;
        }
        Ok(StatementTable::provider(search))
    }
}

/// A `lance_hybrid_search(...)` call: its two halves on one table, planned
/// as one [`crate::physical_plan::LanceSearchExec`].
pub(crate) struct HybridSearch {
    pub(crate) vector: VectorSearch,
    pub(crate) text: FullTextSearch,
    pub(crate) rrf_k: u32,
    schema: SchemaRef,
}

impl fmt::Debug for HybridSearch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HybridSearch")
            .field("vector", &self.vector)
            .field("text", &self.text)
            .field("rrf_k", &self.rrf_k)
            .finish_non_exhaustive()
    }
}

impl HybridSearch {
    /// `vector` and `text` (of the same table) fused with `rrf_k`.
    pub(crate) fn new(vector: VectorSearch, text: FullTextSearch, rrf_k: u32) -> Self {
        let schema = with_extra(
            &vector.table.schema(),
            vec![distance_field(), score_field(), relevance_field()],
        );
        Self {
            vector,
            text,
            rrf_k,
            schema,
        }
    }

    fn set(&mut self, option: &str, session: &dyn Session) -> DFResult<()> {
        let Some((key, value)) = option.split_once('=') else {
            return Err(unknown(option).into());
        };
        match key.trim() {
            "metric" | "nprobes" | "refine_factor" | "ef" | "use_index" => {
                self.vector.set(option, session)
            }
            "columns" | "operator" | "fuzziness" | "phrase" => self.text.set(option, session),
            "filter" => {
                self.vector.set(option, session)?;
                self.text.query.filter = self.vector.query.filter.clone();
                Ok(())
            }
            "rrf_k" => match value.trim().parse::<u32>() {
                Ok(n) if n > 0 => {
                    self.rrf_k = n;
                    Ok(())
                }
                _ => {
                    Err(
                        Error::invalid_option("rrf_k", value.trim(), "must be a positive integer")
                            .into(),
                    )
                }
            },
            _ => Err(unknown(option).into()),
        }
    }
}

fn unknown(option: &str) -> Error {
    Error::UnknownOption {
        key: option.to_string(),
        hint: format!(
            " for {HYBRID_SEARCH_FUNCTION_NAME}: use 'metric=', 'nprobes=', 'refine_factor=', \
             'ef=', 'use_index=', 'columns=', 'operator=', 'fuzziness=', 'phrase=', 'filter=' or \
             'rrf_k='"
        ),
    }
}

#[async_trait]
impl Statement for HybridSearch {
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
        let table = match &self.vector.table {
            Target::Lance(table) => table,
            Target::Cloud(table) => {
                let (vector, filter, postfilter) = self.vector.remote_prepared(state).await?;
                let (text, _) = self.text.remote_prepared()?;
                if postfilter.is_some() {
                    return internal_err!("{HYBRID_SEARCH_FUNCTION_NAME} prefilters only");
                }
                return plan_cloud_search(
                    state,
                    (&self.vector.name, table),
                    projection,
                    (
                        SearchQuery::Hybrid(Box::new(HybridQuery {
                            vector,
                            text,
                            rrf_k: self.rrf_k,
                        })),
                        filter,
                    ),
                    vec![distance_field(), score_field(), relevance_field()],
                    None,
                )
                .await;
            }
        };
        let dataset = table.snapshot(state).await?;
        let (vector, postfilter) = self.vector.prepared(state, &dataset).await?;
        if postfilter.is_some() {
            return internal_err!("{HYBRID_SEARCH_FUNCTION_NAME} prefilters only");
        }
        let text = self.text.prepared(&dataset).await?;
        plan_search(
            state,
            table,
            &dataset,
            projection,
            SearchQuery::Hybrid(Box::new(HybridQuery {
                vector,
                text,
                rrf_k: self.rrf_k,
            })),
            vec![distance_field(), score_field(), relevance_field()],
            None,
        )
    }

    /// Both halves read one version.
    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        let table = pinner.target(&self.vector.table).await?;
        let vector = self.vector.pinned(table.clone(), pinner).await?;
        let text = self.text.pinned(table);
        Ok(Some(StatementTable::provider(Self::new(
            vector, text, self.rrf_k,
        ))))
    }
}
