//! [`CloudTableProvider`]: a LanceDB Cloud or Enterprise table (`db://`) as
//! a DataFusion table, read through the service's REST data plane.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column as PhysicalColumn;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::projection::ProjectionExec;

use super::index_rules::ColumnIndexes;
use super::merge::{MergeOptions, MergeOutput, conform_source};
use super::pushdown;
use crate::cloud::{CloudClient, CloudOptions, CloudTable, MergeRequest, to_lance_sql};
use crate::config::VersionSpec;
use crate::error::{Error, Result};
use crate::physical_plan::cloud_change::{CloudChange, CloudChangeExec, CloudChangeParts};
use crate::physical_plan::cloud_merge::{CloudMergeExec, CloudMergeParts};
use crate::physical_plan::cloud_scan::{CloudScanExec, CloudScanParts, RowRange};
use crate::physical_plan::cloud_write::{CloudWriteExec, CloudWriteParts};

/// A table of a LanceDB Cloud or Enterprise database. Each scan pins the
/// version it reads (the latest, or `lance.version`), counts the rows that
/// pass the pushed filter, and splits them into row ranges, one per
/// partition.
pub(crate) struct CloudTableProvider {
    name: String,
    table: CloudTable,
    schema: SchemaRef,
    /// The version the table is pinned to (`lance.version`, time travel):
    /// read-only.
    version: Option<u64>,
    /// The version this statement reads (set when the statement is
    /// planned, see [`crate::LanceQueryPlanner`]); writes still go to the
    /// latest.
    read_at: Option<u64>,
    /// The table does not exist yet: the first write creates it (`CREATE
    /// TABLE ... AS` in a LanceDB catalog).
    creating: bool,
}

impl fmt::Debug for CloudTableProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudTableProvider")
            .field("name", &self.name)
            .field("table", &self.table)
            .field("version", &self.version)
            .field("read_at", &self.read_at)
            .finish()
    }
}

/// Everything a [`CloudTableProvider`] holds, as plain data (for codecs).
#[derive(Debug, Clone)]
pub(crate) struct CloudProviderParts {
    pub name: String,
    pub table: CloudTable,
    pub schema: SchemaRef,
    pub version: Option<u64>,
    pub read_at: Option<u64>,
    pub creating: bool,
}

impl CloudTableProvider {
    /// Opens the table `options` name: its schema from the service
    /// (`describe`), at the pinned version if one is given.
    pub(crate) async fn open(name: String, options: CloudOptions) -> Result<Self> {
        let version = match options.version {
            VersionSpec::Latest => None,
            VersionSpec::Version(v) => Some(v),
            VersionSpec::Tag(_) => {
                return Err(Error::not_supported(format!(
                    "table '{name}': tags of LanceDB tables are not supported"
                )));
            }
        };
        let client = CloudClient::connect(&options.table)?;
        let (_, schema) = client.describe(version).await?;
        Ok(Self {
            name,
            table: options.table,
            schema: Arc::new(schema),
            version,
            read_at: None,
            creating: false,
        })
    }

    /// A table `CREATE TABLE ... AS` is about to create, with `schema`.
    pub(crate) fn creating(name: String, table: CloudTable, schema: SchemaRef) -> Self {
        Self {
            name,
            table,
            schema,
            version: None,
            read_at: None,
            creating: true,
        }
    }

    /// The provider `parts` describe.
    pub(crate) fn from_parts(parts: CloudProviderParts) -> Self {
        Self {
            name: parts.name,
            table: parts.table,
            schema: parts.schema,
            version: parts.version,
            read_at: parts.read_at,
            creating: parts.creating,
        }
    }

    /// Everything the provider holds.
    pub(crate) fn parts(&self) -> CloudProviderParts {
        CloudProviderParts {
            name: self.name.clone(),
            table: self.table.clone(),
            schema: Arc::clone(&self.schema),
            version: self.version,
            read_at: self.read_at,
            creating: self.creating,
        }
    }

    /// The table's `db://` location (without credentials).
    pub(crate) fn display_uri(&self) -> &str {
        &self.table.location.display_uri
    }

    /// The table at `version` (read-only), with that version's schema.
    pub(crate) async fn at_version(&self, version: u64) -> Result<Self> {
        let client = CloudClient::connect(&self.table)?;
        let (_, schema) = client.describe(Some(version)).await?;
        Ok(Self {
            name: self.name.clone(),
            table: self.table.clone(),
            schema: Arc::new(schema),
            version: Some(version),
            read_at: None,
            creating: false,
        })
    }

    /// The same table with the schema of its latest version (after an
    /// `ALTER TABLE`).
    pub(crate) async fn refreshed(&self) -> Result<Self> {
        let client = CloudClient::connect(&self.table)?;
        let (_, schema) = client.describe(None).await?;
        Ok(Self {
            schema: Arc::new(schema),
            ..Self::from_parts(self.parts())
        })
    }

    /// Whether the first write creates the table.
    pub(crate) fn creates(&self) -> bool {
        self.creating
    }

    /// The service and table, as nodes carry them.
    pub(crate) fn cloud_table(&self) -> &CloudTable {
        &self.table
    }

    /// The table as statements name it.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// An error when the table is pinned to a version (read-only).
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.version {
            Some(version) => Err(Error::read_only(format!(
                "table '{}' ({}) is pinned to version {version}; it can be read, not written",
                self.name,
                self.display_uri(),
            ))),
            None => Ok(()),
        }
    }

    fn refuse(&self, what: &str) -> datafusion::error::DataFusionError {
        Error::not_supported(format!(
            "table '{}' ({}): {what} is not supported for LanceDB Cloud tables (INSERT, INSERT \
             OVERWRITE, INSERT OR REPLACE, TRUNCATE, and DELETE / UPDATE planned by \
             register_lance's rules, are)",
            self.name,
            self.display_uri()
        ))
        .into()
    }

    /// Whether the statement must fix the version it reads.
    pub(crate) fn needs_snapshot(&self) -> bool {
        self.version.is_none() && self.read_at.is_none() && !self.creating
    }

    /// The service and table, as one statement's versions are keyed.
    pub(crate) fn service_key(&self) -> (String, String) {
        (
            self.table.endpoint.clone(),
            self.table.location.display_uri.clone(),
        )
    }

    /// The same table, read at `version` by this statement.
    pub(crate) fn read_at(&self, version: u64) -> Self {
        let mut parts = self.parts();
        parts.read_at = Some(version);
        Self::from_parts(parts)
    }

    /// The version this table reads: the one it is fixed at, else the
    /// latest (checking that its schema is the one the table was
    /// registered with).
    pub(crate) async fn latest_version(&self) -> Result<u64> {
        self.pin(&CloudClient::connect(&self.table)?).await
    }

    /// The table's primary key (Lance's unenforced primary key, which the
    /// schema's field metadata records), in key order.
    pub(crate) fn primary_key(&self) -> Vec<String> {
        lance_core::datatypes::Schema::try_from(self.schema.as_ref())
            .map(|schema| {
                schema
                    .unenforced_primary_key()
                    .into_iter()
                    .map(|f| f.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `INSERT OR REPLACE`: a `merge_insert` on the primary key that
    /// replaces matched rows and inserts the others (an upsert: retried on
    /// any failure), answering the rows it wrote.
    fn plan_replace(&self, input: Arc<dyn ExecutionPlan>) -> DFResult<Arc<dyn ExecutionPlan>> {
        let keys = self.primary_key();
        if keys.is_empty() {
            return Err(Error::not_supported(format!(
                "INSERT OR REPLACE into '{}' ({}) needs a primary key; the table has none (use \
                 lance_merge(...) with explicit key columns)",
                self.name,
                self.display_uri()
            ))
            .into());
        }
        let options = MergeOptions::default();
        let source = conform_source(&self.name, &self.schema, input, &keys, &options)?;
        Ok(Arc::new(CloudMergeExec::new(
            Arc::clone(&source),
            CloudMergeParts {
                name: self.name.clone(),
                table: self.table.clone(),
                schema: source.schema(),
                merge: MergeRequest {
                    keys,
                    update_all: true,
                    insert_all: true,
                    ..Default::default()
                },
                output: MergeOutput::Count,
            },
        )))
    }

    /// The indices of the latest version (or the one the table is fixed at).
    pub(crate) async fn latest_indexes(&self) -> Result<ColumnIndexes> {
        let client = CloudClient::connect(&self.table)?;
        let version = self.pin(&client).await?;
        self.indexes(&client, version).await
    }

    /// The indices of `version`, as the filter rules see them (one
    /// `list_indices` request). A service that does not list indices leaves
    /// every filter to DataFusion.
    pub(crate) async fn indexes(
        &self,
        client: &CloudClient,
        version: u64,
    ) -> Result<ColumnIndexes> {
        match client.indices(version).await {
            Ok(Some(listed)) => Ok(ColumnIndexes::listed(&listed)),
            Ok(None) => {
                log::warn!(
                    "LanceDB table '{}': the service's index list could not be read; filters \
                     are evaluated by DataFusion",
                    self.display_uri()
                );
                Ok(ColumnIndexes::unknown())
            }
            Err(
                e @ (Error::NotFound { .. }
                | Error::Cloud {
                    status: Some(405 | 501),
                    ..
                }),
            ) => {
                log::warn!(
                    "LanceDB table '{}': the service does not list indices ({e}); filters are \
                     evaluated by DataFusion",
                    self.display_uri()
                );
                Ok(ColumnIndexes::unknown())
            }
            Err(e) => Err(e),
        }
    }

    /// The version a scan reads, checking that its schema is the one the
    /// table was registered with.
    async fn pin(&self, client: &CloudClient) -> Result<u64> {
        if let Some(v) = self.version.or(self.read_at) {
            return Ok(v);
        }
        let (version, schema) = client.describe(None).await?;
        let same = schema.fields().len() == self.schema.fields().len()
            && schema
                .fields()
                .iter()
                .zip(self.schema.fields())
                .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
        if !same {
            return Err(Error::schema_mismatch(format!(
                "table '{}': the schema of {} changed at version {version}; re-register the \
                 table to pick up schema changes",
                self.name,
                self.display_uri()
            )));
        }
        Ok(version)
    }
}

#[async_trait]
impl TableProvider for CloudTableProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| {
                if pushdown::is_exact(f, &self.schema) && to_lance_sql(f).is_some() {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Unsupported
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let client = CloudClient::connect(&self.table)?;
        let version = self.pin(&client).await?;
        // Filters the service's indices would answer with semantics of their
        // own are evaluated here, on the rows of the others.
        let (remote, local): (Vec<&Expr>, Vec<&Expr>) = if filters.is_empty() {
            (vec![], vec![])
        } else {
            let indexes = self.indexes(&client, version).await?;
            filters
                .iter()
                .partition(|f| indexes.allows(f, &self.schema))
        };
        let filter = remote
            .iter()
            .map(|f| {
                to_lance_sql(f).ok_or_else(|| {
                    datafusion::error::DataFusionError::Internal(format!(
                        "filter {f} was pushed to LanceDB table '{}' but has no Lance SQL form",
                        self.name
                    ))
                })
            })
            .collect::<DFResult<Vec<_>>>()?;
        let filter = (!filter.is_empty()).then(|| filter.join(" AND "));
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let projection = projection.unwrap_or(&all);
        // The columns read, each once: the projection's, and those the local
        // filters need; `shown` picks the projection's out of them.
        let mut read: Vec<usize> = Vec::new();
        let mut shown = Vec::with_capacity(projection.len());
        for &i in projection {
            let at = match read.iter().position(|&r| r == i) {
                Some(at) => at,
                None => {
                    read.push(i);
                    read.len() - 1
                }
            };
            shown.push(at);
        }
        for f in &local {
            for c in f.column_refs() {
                let i = self.schema.index_of(&c.name)?;
                if !read.contains(&i) {
                    read.push(i);
                }
            }
        }
        let schema: SchemaRef = Arc::new(self.schema.project(&read)?);
        let mut columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        if columns.is_empty() {
            // Rows are counted: ask for the narrowest thing there is, one column.
            columns.extend(self.schema.fields().first().map(|f| f.name().clone()));
        }
        let count = client.count_rows(version, filter.as_deref()).await?;
        let total = match limit {
            Some(l) if local.is_empty() => count.min(l as u64),
            _ => count,
        };
        let ranges = split(
            total,
            state.config().target_partitions(),
            u64::from(self.table.requests.read_rows),
        );
        let scan: Arc<dyn ExecutionPlan> = Arc::new(CloudScanExec::new(CloudScanParts {
            table: self.table.clone(),
            version,
            ranges,
            columns,
            schema: Arc::clone(&schema),
            filter,
        }));
        let Some(predicate) = conjunction(local.into_iter().cloned()) else {
            if shown.iter().copied().eq(0..read.len()) {
                return Ok(scan);
            }
            // A projection naming a column twice.
            let exprs = shown.iter().zip(projection).map(|(&at, &field)| {
                let name = self.schema.field(field).name();
                (
                    Arc::new(PhysicalColumn::new(name, at)) as Arc<dyn PhysicalExpr>,
                    name.clone(),
                )
            });
            return Ok(Arc::new(ProjectionExec::try_new(exprs, scan)?));
        };
        let predicate =
            state.create_physical_expr(predicate, &DFSchema::try_from(schema.as_ref().clone())?)?;
        let filtered = FilterExecBuilder::new(predicate, scan)
            .apply_projection(Some(shown))?
            .with_fetch(limit)
            .build()?;
        Ok(Arc::new(filtered))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.check_writable()?;
        let overwrite = match insert_op {
            InsertOp::Append => false,
            InsertOp::Overwrite => true,
            InsertOp::Replace => return self.plan_replace(input),
        };
        Ok(Arc::new(CloudWriteExec::new(
            input,
            CloudWriteParts {
                name: self.name.clone(),
                table: self.table.clone(),
                schema: Arc::clone(&self.schema),
                overwrite,
                create: self.creating,
            },
        )))
    }

    async fn delete_from(
        &self,
        _state: &dyn Session,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Err(self.refuse("DELETE"))
    }

    async fn update(
        &self,
        _state: &dyn Session,
        _assignments: Vec<(String, Expr)>,
        _filters: Vec<Expr>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        Err(self.refuse("UPDATE"))
    }

    /// `TRUNCATE`: one `delete` of every row (one version; the schema is
    /// kept), answering the rows it removed.
    async fn truncate(&self, _state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.check_writable()?;
        Ok(Arc::new(CloudChangeExec::new(CloudChangeParts {
            name: self.name.clone(),
            table: self.table.clone(),
            change: CloudChange::Delete { predicate: None },
        })))
    }
}

/// `total` rows as at most `partitions` ranges of at least `page` rows each
/// (one range when there are fewer).
fn split(total: u64, partitions: usize, page: u64) -> Vec<RowRange> {
    let n = total
        .div_ceil(page.max(1))
        .clamp(1, partitions.max(1) as u64);
    let (base, extra) = (total / n, total % n);
    let mut offset = 0;
    (0..n)
        .map(|i| {
            let rows = base + u64::from(i < extra);
            let range = RowRange { offset, rows };
            offset += rows;
            range
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_into_ranges_of_at_least_a_page() {
        let r = |v: Vec<RowRange>| v.iter().map(|r| (r.offset, r.rows)).collect::<Vec<_>>();
        assert_eq!(r(split(0, 4, 10)), vec![(0, 0)]);
        assert_eq!(r(split(15, 4, 10)), vec![(0, 8), (8, 7)]);
        assert_eq!(
            r(split(100, 4, 10)),
            vec![(0, 25), (25, 25), (50, 25), (75, 25)]
        );
        assert_eq!(r(split(7, 4, 100)), vec![(0, 7)]);
    }
}
