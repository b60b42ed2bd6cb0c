//! `lance_cache_stats()`: what the context's Lance session holds.
//!
//! | cache | entries | size_bytes | hits | misses |
//! |---|---|---|---|---|
//! | `session` | approximate items in all caches | deep size of all caches | | |
//! | `metadata` | manifests, file metadata, ... | bytes | hits | misses |
//! | `index` | loaded indices | bytes | hits | misses |
//! | `object_stores` | live stores | | reuses | creations |
//! | `datasets` | opens | | opens answered without a manifest lookup | manifest loads |
//!
//! `capacity_bytes` gives the budget where one applies.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use crate::error::fail;
use crate::session::LanceSessionCache;
use crate::table::statement::{Statement, StatementTable};

/// SQL name of the cache statistics function.
pub const CACHE_STATS_FUNCTION_NAME: &str = "lance_cache_stats";

/// `lance_cache_stats()`: one row per cache of the context's Lance session.
#[derive(Debug, Default)]
pub struct CacheStatsFunction {}

impl TableFunctionImpl for CacheStatsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        if !args.exprs().is_empty() {
            return fail!(
                invalid_input,
                "{CACHE_STATS_FUNCTION_NAME}() takes no arguments"
            );
        }
        Ok(StatementTable::provider(CacheStats {}))
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("cache", DataType::Utf8, false),
        Field::new("entries", DataType::UInt64, true),
        Field::new("size_bytes", DataType::UInt64, true),
        Field::new("capacity_bytes", DataType::UInt64, true),
        Field::new("hits", DataType::UInt64, true),
        Field::new("misses", DataType::UInt64, true),
    ]))
}

/// The statistics of the Lance session of the context that plans the query
/// (read when the query is planned).
#[derive(Debug, Default)]
pub(crate) struct CacheStats {}

type Row = (
    &'static str,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

impl CacheStats {
    async fn rows(cache: &LanceSessionCache) -> Vec<Row> {
        let session = cache.session();
        let metadata = session.metadata_cache_stats().await;
        let index = session.index_cache_stats().await;
        let stores = session.store_registry().stats();
        let opener = cache.opener_stats();
        let budgets = cache.budgets();
        let n = |v: usize| Some(v as u64);
        vec![
            (
                "session",
                n(session.approx_num_items()),
                Some(session.size_bytes()),
                budgets.map(|b| (b.metadata_bytes + b.index_bytes) as u64),
                None,
                None,
            ),
            (
                "metadata",
                n(metadata.num_entries),
                n(metadata.size_bytes),
                budgets.map(|b| b.metadata_bytes as u64),
                Some(metadata.hits),
                Some(metadata.misses),
            ),
            (
                "index",
                n(index.num_entries),
                n(index.size_bytes),
                budgets.map(|b| b.index_bytes as u64),
                Some(index.hits),
                Some(index.misses),
            ),
            (
                "object_stores",
                n(stores.active_stores),
                None,
                None,
                Some(stores.hits),
                Some(stores.misses),
            ),
            (
                "datasets",
                Some(opener.opens),
                None,
                None,
                Some(opener.reused),
                Some(opener.loads),
            ),
        ]
    }
}

#[async_trait]
impl Statement for CacheStats {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        let rows = Self::rows(&LanceSessionCache::for_config(state.config())).await;
        let column = |f: fn(&Row) -> Option<u64>| {
            Arc::new(UInt64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
        };
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                column(|r| r.1),
                column(|r| r.2),
                column(|r| r.3),
                column(|r| r.4),
                column(|r| r.5),
            ],
        )?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            schema(),
            None,
        )?)
    }
}
