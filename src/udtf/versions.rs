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
use datafusion::common::{ScalarValue, plan_err};
use datafusion::datasource::TableProvider;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;

use crate::config::VersionSpec;
use crate::error::Error;
use crate::location::{TableLocation, redact_uri};
use crate::session::LanceSessionCache;
use crate::table::lookup::table_or_location;
use crate::table::statement::{Statement, StatementTable};

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
        Ok(StatementTable::provider(Versions {
            target,
            location: None,
        }))
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

/// `lance_versions('<target>')` as a statement (read when the query is
/// planned).
pub(crate) struct Versions {
    /// The table or location as the query names it.
    pub(crate) target: String,
    /// Where it lives, once resolved (see [`crate::resolve_lance_tables`]).
    pub(crate) location: Option<TableLocation>,
}

impl std::fmt::Debug for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The target may be a location with credentials in it.
        f.debug_struct("Versions")
            .field("target", &redact_uri(&self.target))
            .field("location", &self.location)
            .finish()
    }
}

#[async_trait]
impl Statement for Versions {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        let location = match &self.location {
            Some(location) => location.clone(),
            None => table_or_location(state, &self.target).await?,
        };
        let cache = LanceSessionCache::for_config(state.config());
        let ds = cache
            .open(
                &location.uri,
                &cache.params_for(&location),
                &VersionSpec::Latest,
            )
            .await?;
        let lance_err =
            |e| DataFusionError::from(Error::lance("listing versions of", &location.uri, e));
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
            None,
        )?)
    }
}
