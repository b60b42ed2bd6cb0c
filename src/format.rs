//! `COPY (SELECT ...) TO '<location>' STORED AS LANCE [OPTIONS (...)]`:
//! creates a Lance dataset from a query in one statement.
//!
//! The query's partitions write in parallel and ONE commit creates version 1;
//! a failure leaves no dataset. The location must not hold a dataset yet (use
//! `INSERT INTO` / `INSERT OVERWRITE` for existing tables). Options:
//! `lance.data_storage_version`, `lance.enable_stable_row_ids`,
//! `lance.max_rows_per_file`, `lance.max_rows_per_group`,
//! `lance.storage.<name>`.
//!
//! Reading through this format (listing tables) is not supported: Lance
//! tables are read with `CREATE EXTERNAL TABLE ... STORED AS LANCE` or a
//! quoted path.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::Statistics;
use datafusion::common::file_options::file_type::GetExt;
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{
    ArrowSource, FileScanConfig, FileSinkConfig, FileSource,
};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::Result as DFResult;
use datafusion::object_store::{ObjectMeta, ObjectStore};
use datafusion::physical_expr::{LexRequirement, PhysicalExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::expressions::{CastExpr, Column};
use datafusion::physical_plan::projection::ProjectionExec;

use crate::config::{LanceConfig, LanceTableOptions};
use crate::error::{Error, fail};
use crate::location::{REST_PREFIX, TableLocation, normalize_uri, redact_uri};
use crate::physical_plan::transaction::ensure_absent;
use crate::physical_plan::{CommitKind, LanceCommitExec, LanceWriteExec, WriteTarget};

use crate::table::create::storable_type;

/// Registers `STORED AS LANCE` for `COPY ... TO`.
///
/// The factory a session registers has no options: each `COPY` gives its
/// own. [`crate::resolve_lance_tables`] moves a `COPY`'s options into the
/// factory of its plan, so that they travel with an encoded plan
/// (`datafusion-proto` does not encode a `COPY`'s options).
#[derive(Debug, Default)]
pub struct LanceFormatFactory {
    options: Option<LanceTableOptions>,
}

impl LanceFormatFactory {
    /// The factory of one `COPY`, holding its options.
    pub(crate) fn with_options(options: LanceTableOptions) -> Self {
        Self {
            options: Some(options),
        }
    }

    /// The options of the `COPY` this factory belongs to, if it holds them.
    pub(crate) fn copy_options(&self) -> Option<&LanceTableOptions> {
        self.options.as_ref()
    }

    /// Parses a `COPY`'s options.
    pub(crate) fn parse_options(
        format_options: &HashMap<String, String>,
    ) -> DFResult<LanceTableOptions> {
        let options = LanceTableOptions::from_options(format_options)?;
        if !options.version.is_latest() {
            return Err(Error::not_supported(
                "'lance.version' and 'lance.tag' do not apply to COPY, which creates a new table",
            )
            .into());
        }
        Ok(options)
    }
}

impl GetExt for LanceFormatFactory {
    fn get_ext(&self) -> String {
        "lance".to_string()
    }
}

impl FileFormatFactory for LanceFormatFactory {
    fn create(
        &self,
        _state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> DFResult<Arc<dyn FileFormat>> {
        let options = match &self.options {
            Some(options) if format_options.is_empty() => options.clone(),
            _ => Self::parse_options(format_options)?,
        };
        Ok(Arc::new(LanceFormat { options }))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(LanceFormat::default())
    }
}

/// The Lance "file format" of `COPY ... STORED AS LANCE` (write only).
#[derive(Debug, Default)]
pub struct LanceFormat {
    options: LanceTableOptions,
}

const READ_HINT: &str = "read Lance datasets with CREATE EXTERNAL TABLE ... STORED AS LANCE \
     or SELECT ... FROM '<location>'";

#[async_trait]
impl FileFormat for LanceFormat {
    fn get_ext(&self) -> String {
        "lance".to_string()
    }

    fn get_ext_with_compression(&self, _c: &FileCompressionType) -> DFResult<String> {
        Ok(self.get_ext())
    }

    fn compression_type(&self) -> Option<FileCompressionType> {
        None
    }

    async fn infer_schema(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore>,
        _objects: &[ObjectMeta],
    ) -> DFResult<SchemaRef> {
        fail!(not_supported, "{READ_HINT}")
    }

    async fn infer_stats(
        &self,
        _state: &dyn Session,
        _store: &Arc<dyn ObjectStore>,
        _table_schema: SchemaRef,
        _object: &ObjectMeta,
    ) -> DFResult<Statistics> {
        fail!(not_supported, "{READ_HINT}")
    }

    async fn create_physical_plan(
        &self,
        _state: &dyn Session,
        _conf: FileScanConfig,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        fail!(not_supported, "{READ_HINT}")
    }

    async fn create_writer_physical_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        state: &dyn Session,
        conf: FileSinkConfig,
        _order_requirements: Option<LexRequirement>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let display = redact_uri(&conf.original_url);
        if !conf.table_partition_cols.is_empty() {
            return Err(Error::not_supported(format!(
                "COPY TO '{display}' STORED AS LANCE: PARTITIONED BY is not supported"
            ))
            .into());
        }
        let uri = normalize_uri(&conf.original_url)?;
        let settings = LanceConfig::from_options(state.config_options());
        let input = storable_input(input)?;
        let target = Arc::new(WriteTarget::new(
            display,
            TableLocation::new(uri, self.options.storage_options.clone()),
            None,
            input.schema(),
            &settings,
            &self.options,
        ));
        // A table of a REST namespace gets its location from the server when
        // the statement runs (see `catalog::ddl`), which checks it then.
        if !conf.original_url.starts_with(REST_PREFIX) {
            ensure_absent(&target.open_for(state.config())).await?;
        }
        let write = Arc::new(LanceWriteExec::new(input, Arc::clone(&target)));
        Ok(Arc::new(LanceCommitExec::new(
            write,
            target,
            CommitKind::Create,
        )))
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        // Never used to read (see `create_physical_plan`).
        Arc::new(ArrowSource::new_file_source(table_schema))
    }
}

impl LanceFormat {
    /// The options this format was created with.
    pub fn options(&self) -> &LanceTableOptions {
        &self.options
    }
}

/// Casts view types (`Utf8View`, ...) the query may produce to the types Lance stores.
fn storable_input(input: Arc<dyn ExecutionPlan>) -> DFResult<Arc<dyn ExecutionPlan>> {
    let schema = input.schema();
    let needs_cast = schema
        .fields()
        .iter()
        .any(|f| storable_type(f.data_type()) != *f.data_type());
    if !needs_cast {
        return Ok(input);
    }
    let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(f.name(), i));
            let target = storable_type(f.data_type());
            let expr: Arc<dyn PhysicalExpr> = if target == *f.data_type() {
                column
            } else {
                Arc::new(CastExpr::new(column, target, None))
            };
            (expr, f.name().clone())
        })
        .collect();
    Ok(Arc::new(ProjectionExec::try_new(exprs, input)?))
}
