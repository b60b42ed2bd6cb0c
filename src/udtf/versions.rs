//! `lance_versions('<table or location>')`: the version history of a Lance
//! table — one row per version with the operation that produced it.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `version` | UInt64 | version number |
//! | `timestamp` | Timestamp(µs, UTC) | commit time |
//! | `operation` | Utf8 | `Overwrite`, `Append`, `Delete`, `Update`, ... (NULL if unrecorded) |
//! | `fragments` | UInt64 | live fragments in the version |
//! | `rows` | UInt64 | live rows in the version |
//!
//! The history is read when the query is planned (one manifest and one
//! transaction file per version): a diagnostic, not a hot path.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{ScalarValue, TableReference, plan_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::config::VersionSpec;
use crate::error::Error;
use crate::location::normalize_uri;
use crate::session::{LanceSessionCache, store_params};
use crate::table::LanceTableProvider;

/// SQL name of the version-history function.
pub const VERSIONS_FUNCTION_NAME: &str = "lance_versions";

/// `lance_versions('<table or location>')`.
#[derive(Debug, Default)]
pub struct VersionsFunction {}

impl TableFunctionImpl for VersionsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let target = match args.exprs() {
            [Expr::Literal(ScalarValue::Utf8(Some(s)), _)]
            | [Expr::Literal(ScalarValue::Utf8View(Some(s)), _)]
            | [Expr::Literal(ScalarValue::LargeUtf8(Some(s)), _)] => s.clone(),
            _ => {
                return plan_err!(
                    "{VERSIONS_FUNCTION_NAME}() takes one string: a table name or a dataset location"
                );
            }
        };
        Ok(Arc::new(VersionsTable { target }))
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("version", DataType::UInt64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("operation", DataType::Utf8, true),
        Field::new("fragments", DataType::UInt64, true),
        Field::new("rows", DataType::UInt64, true),
    ]))
}

#[derive(Debug)]
struct VersionsTable {
    target: String,
}

/// The latest version of the dataset `target` names: a registered Lance
/// table, else a location.
pub(crate) async fn dataset_named(
    state: &dyn Session,
    target: &str,
) -> DFResult<Arc<lance::Dataset>> {
    let cache = LanceSessionCache::for_config(state.config());
    if let Some(provider) = registered_lance_table(state, target).await? {
        return Ok(cache
            .open(
                provider.uri(),
                provider.store_params(),
                &VersionSpec::Latest,
            )
            .await?);
    }
    let uri = normalize_uri(target)?;
    match cache
        .open(
            &uri,
            &store_params(&Default::default()),
            &VersionSpec::Latest,
        )
        .await
    {
        Ok(ds) => Ok(ds),
        Err(Error::DatasetNotFound { .. }) => {
            plan_err!("'{target}' is neither a Lance table nor a Lance dataset location")
        }
        Err(e) => Err(e.into()),
    }
}

/// The Lance table registered under `name` in `state`, if any.
async fn registered_lance_table(
    state: &dyn Session,
    name: &str,
) -> DFResult<Option<Arc<LanceTableProvider>>> {
    let Some(state) = state.as_any().downcast_ref::<SessionState>() else {
        return Ok(None);
    };
    let reference = TableReference::from(name);
    let Ok(schema) = state.schema_for_ref(reference.clone()) else {
        return Ok(None);
    };
    let Some(table) = schema.table(reference.table()).await? else {
        return Ok(None);
    };
    let provider: Arc<dyn std::any::Any + Send + Sync> = table;
    Ok(provider.downcast::<LanceTableProvider>().ok())
}

#[async_trait]
impl TableProvider for VersionsTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let ds = dataset_named(state, &self.target).await?;
        let lance_err = |e| DataFusionError::from(Error::lance("listing versions of", ds.uri(), e));
        let versions = ds.versions().await.map_err(lance_err)?;
        let mut operations = Vec::with_capacity(versions.len());
        for v in &versions {
            let txn = ds
                .read_transaction_by_version(v.version)
                .await
                .map_err(lance_err)?;
            operations.push(txn.map(|t| t.operation.to_string()));
        }
        let number = |v: &lance::dataset::Version, key: &str| {
            v.metadata.get(key).and_then(|n| n.parse::<u64>().ok())
        };
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(UInt64Array::from_iter_values(
                    versions.iter().map(|v| v.version),
                )),
                Arc::new(
                    TimestampMicrosecondArray::from_iter_values(
                        versions.iter().map(|v| v.timestamp.timestamp_micros()),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(StringArray::from(operations)),
                Arc::new(UInt64Array::from(
                    versions
                        .iter()
                        .map(|v| number(v, "total_fragments"))
                        .collect::<Vec<_>>(),
                )),
                Arc::new(UInt64Array::from(
                    versions
                        .iter()
                        .map(|v| number(v, "total_rows"))
                        .collect::<Vec<_>>(),
                )),
            ],
        )?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            schema(),
            projection.cloned(),
        )?)
    }
}
