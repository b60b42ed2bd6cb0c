//! [`LanceScanExec`]: reads one pinned Lance version, one fragment group per
//! partition.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Statistics, internal_err};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet, RecordOutput,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use lance_table::format::Fragment;

use crate::error::Error;
use crate::location::{Snapshot, TableLocation};
use crate::session::LanceSessionCache;

use crate::physical_plan::scan_metrics::{HarvestOnDrop, ScanMetrics};

/// Live rows of a fragment (deleted rows excluded); fragments with unknown
/// counts (legacy data) weigh as their physical size, or 1.
pub(crate) fn live_rows(fragment: &Fragment) -> usize {
    fragment.num_rows().or(fragment.physical_rows).unwrap_or(1)
}

/// The fragment with `id` in a manifest's list and its position: a binary
/// search (the list is sorted by id), then a linear one for legacy manifests
/// that are not.
pub(crate) fn fragment_by_id(fragments: &[Fragment], id: u64) -> Option<(usize, &Fragment)> {
    let at = fragments.partition_point(|f| f.id < id);
    match fragments.get(at) {
        Some(f) if f.id == id => Some((at, f)),
        _ => fragments.iter().enumerate().find(|(_, f)| f.id == id),
    }
}

/// Scanner knobs, resolved from `lance.*` settings at planning time.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScanOptions {
    /// Rows per batch.
    pub batch_size: usize,
    /// Bytes per batch Lance aims for, sizing batches from the decoded data
    /// (None = rows only). Lance splits any batch larger than twice this.
    pub batch_size_bytes: Option<u64>,
    /// Fragments read concurrently (None = Lance's default).
    pub fragment_readahead: Option<usize>,
    /// Batches decoded concurrently (None = Lance's default).
    pub batch_readahead: Option<usize>,
    /// I/O buffer bytes (None = Lance's default).
    pub io_buffer_size: Option<u64>,
    /// Whether Lance may use scalar indices for the pushed filter (false
    /// too when they already narrowed the scan to one batch of rows while
    /// planning: Lance then rechecks those rows instead of searching again).
    pub use_scalar_index: bool,
    /// Append Lance's `_rowaddr` column (DELETE / UPDATE, `lance_rows`).
    pub row_addr: bool,
    /// Append Lance's `_rowid` column before it (`lance_rows`).
    pub row_id: bool,
    /// The scalar indices Lance may answer the pushed filter from (shown by
    /// `EXPLAIN`).
    pub scalar_indexes: Vec<String>,
    /// Fragments of the version left out because those indices rule out
    /// every row in them (shown by `EXPLAIN`).
    #[serde(default)]
    pub pruned_fragments: usize,
}

/// Rows of one partition's fragments, for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRows {
    /// Live rows (deleted rows excluded).
    pub rows: usize,
    /// False when some fragment's count is unknown (legacy data).
    pub exact: bool,
}

impl GroupRows {
    /// The rows of `group`.
    pub fn of(group: &[&Fragment]) -> Self {
        Self {
            rows: group.iter().map(|f| live_rows(f)).sum(),
            exact: group.iter().all(|f| f.num_rows().is_some()),
        }
    }
}

/// Reads one committed version of a Lance table. Partition `i` scans
/// fragment group `i`; every partition reads the same version.
///
/// The node is plain data: where the table lives, the version (and its
/// manifest's e_tag), the fragment ids of each partition with their row
/// counts, the projected columns, the filter Lance evaluates and the limit.
/// A task opens the version through its process's Lance session when it
/// runs: no dataset handle, no manifest travels with the plan.
#[derive(Debug)]
pub struct LanceScanExec {
    location: TableLocation,
    snapshot: Snapshot,
    groups: Vec<Vec<u64>>,
    group_rows: Vec<GroupRows>,
    columns: Vec<String>,
    schema: SchemaRef,
    filter: Option<Expr>,
    limit: Option<usize>,
    options: ScanOptions,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

/// What a [`LanceScanExec`] reads, as plain data (see [`LanceScanExec::parts`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ScanParts {
    /// Where the table lives.
    pub location: TableLocation,
    /// The version every partition reads.
    pub snapshot: Snapshot,
    /// Fragment ids per partition.
    pub groups: Vec<Vec<u64>>,
    /// Rows per partition.
    pub group_rows: Vec<GroupRows>,
    /// Columns Lance returns, in output order (`_rowaddr` apart).
    pub columns: Vec<String>,
    /// The output schema.
    pub schema: SchemaRef,
    /// The filter Lance evaluates.
    pub filter: Option<Expr>,
    /// The per-partition row limit.
    pub limit: Option<usize>,
    /// Scanner knobs.
    pub options: ScanOptions,
}

impl LanceScanExec {
    /// Creates a scan of `groups` (one partition each; no groups gives one
    /// empty partition).
    #[expect(clippy::too_many_arguments, reason = "plain-data node")]
    pub(crate) fn new(
        location: TableLocation,
        snapshot: Snapshot,
        groups: Vec<Vec<&Fragment>>,
        columns: Vec<String>,
        schema: SchemaRef,
        filter: Option<Expr>,
        limit: Option<usize>,
        options: ScanOptions,
    ) -> Self {
        Self::from_parts(ScanParts {
            location,
            snapshot,
            group_rows: groups.iter().map(|g| GroupRows::of(g)).collect(),
            groups: groups
                .iter()
                .map(|g| g.iter().map(|f| f.id).collect())
                .collect(),
            columns,
            schema,
            filter,
            limit,
            options,
        })
    }

    /// The scan `parts` describe (e.g. decoded by a codec).
    pub fn from_parts(parts: ScanParts) -> Self {
        let ScanParts {
            location,
            snapshot,
            mut groups,
            mut group_rows,
            columns,
            schema,
            filter,
            limit,
            options,
        } = parts;
        if groups.is_empty() {
            groups.push(Vec::new());
            group_rows = vec![GroupRows {
                rows: 0,
                exact: true,
            }];
        }
        let properties = Arc::new(
            PlanProperties::new(
                EquivalenceProperties::new(Arc::clone(&schema)),
                Partitioning::UnknownPartitioning(groups.len()),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )
            .with_scheduling_type(SchedulingType::Cooperative),
        );
        Self {
            location,
            snapshot,
            groups,
            group_rows,
            columns,
            schema,
            filter,
            limit,
            options,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Everything the scan reads, as plain data.
    pub fn parts(&self) -> ScanParts {
        ScanParts {
            location: self.location.clone(),
            snapshot: self.snapshot.clone(),
            groups: self.groups.clone(),
            group_rows: self.group_rows.clone(),
            columns: self.columns.clone(),
            schema: Arc::clone(&self.schema),
            filter: self.filter.clone(),
            limit: self.limit,
            options: self.options.clone(),
        }
    }

    /// The table URI as shown in plans (credentials never included).
    pub fn display_uri(&self) -> &str {
        &self.location.display_uri
    }

    /// The projected column names, in output order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The table version every partition reads.
    pub fn version(&self) -> u64 {
        self.snapshot.version
    }

    /// Fragment ids per partition.
    pub fn fragment_groups(&self) -> Vec<Vec<u64>> {
        self.groups.clone()
    }

    /// The filter Lance evaluates, if any.
    pub fn filter(&self) -> Option<&Expr> {
        self.filter.as_ref()
    }

    /// The per-partition row limit, if any.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    fn fragment_count(&self) -> usize {
        self.groups.iter().map(Vec::len).sum()
    }

    fn group_statistics(&self, group: GroupRows) -> Statistics {
        let GroupRows { rows, exact } = group;
        let num_rows = match (&self.filter, self.limit) {
            (Some(_), _) => Precision::Inexact(rows),
            (None, Some(limit)) if exact => Precision::Exact(rows.min(limit)),
            (None, None) if exact => Precision::Exact(rows),
            (None, limit) => Precision::Inexact(limit.map_or(rows, |l| rows.min(l))),
        };
        let width: Option<usize> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.data_type().primitive_width())
            .sum();
        let total_byte_size = match (num_rows.get_value(), width) {
            (Some(n), Some(w)) => Precision::Inexact(n * w),
            _ => Precision::Absent,
        };
        Statistics {
            num_rows,
            total_byte_size,
            column_statistics: vec![ColumnStatistics::new_unknown(); self.schema.fields().len()],
        }
    }
}

impl DisplayAs for LanceScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        if self.options.row_id {
            shown.push("_rowid");
        }
        if self.options.row_addr {
            shown.push("_rowaddr");
        }
        let columns = shown.join(", ");
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "LanceScanExec: uri={}, version={}, partitions={}, fragments={}, projection=[{}]",
                    self.location.display_uri,
                    self.version(),
                    self.groups.len(),
                    self.fragment_count(),
                    columns
                )?;
                if let Some(filter) = &self.filter {
                    write!(f, ", filter={filter}")?;
                }
                if !self.options.scalar_indexes.is_empty() {
                    write!(
                        f,
                        ", scalar_index=[{}]",
                        self.options.scalar_indexes.join(", ")
                    )?;
                }
                if self.options.pruned_fragments > 0 {
                    write!(f, ", pruned_fragments={}", self.options.pruned_fragments)?;
                }
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit}")?;
                }
                if matches!(t, DisplayFormatType::Verbose) {
                    write!(f, ", fragment_groups={:?}", self.fragment_groups())?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "uri={}", self.location.display_uri)?;
                writeln!(f, "version={}", self.version())?;
                writeln!(f, "partitions={}", self.groups.len())?;
                writeln!(f, "fragments={}", self.fragment_count())?;
                writeln!(f, "projection=[{columns}]")?;
                if let Some(filter) = &self.filter {
                    writeln!(f, "filter={filter}")?;
                }
                if !self.options.scalar_indexes.is_empty() {
                    writeln!(
                        f,
                        "scalar_index=[{}]",
                        self.options.scalar_indexes.join(", ")
                    )?;
                }
                if self.options.pruned_fragments > 0 {
                    writeln!(f, "pruned_fragments={}", self.options.pruned_fragments)?;
                }
                if let Some(limit) = self.limit {
                    writeln!(f, "limit={limit}")?;
                }
                Ok(())
            }
        }
    }
}

impl ExecutionPlan for LanceScanExec {
    fn name(&self) -> &str {
        "LanceScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("LanceScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let Some(group) = self.groups.get(partition).cloned() else {
            return internal_err!(
                "LanceScanExec: partition {partition} requested, {} available",
                self.groups.len()
            );
        };
        let schema = Arc::clone(&self.schema);
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        if group.is_empty() {
            baseline.done();
            return Ok(Box::pin(RecordBatchStreamAdapter::new(
                schema,
                futures::stream::empty(),
            )));
        }
        let request = ScanRequest {
            location: self.location.clone(),
            snapshot: self.snapshot.clone(),
            fragments: group,
            columns: self.columns.clone(),
            filter: self.filter.clone(),
            limit: self.limit,
            options: self.options.clone(),
        };
        let out_schema = Arc::clone(&schema);
        let lance_metrics = ScanMetrics::new(&self.metrics, partition);
        let stream = futures::stream::once(request.open(context, lance_metrics))
            .try_flatten()
            .map(move |batch| {
                let _timer = baseline.elapsed_compute().timer();
                Ok(conform(batch?, &out_schema)?.record_output(&baseline))
            });
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            schema, stream,
        ))))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        match partition {
            Some(p) => match self.group_rows.get(p) {
                Some(&group) => Ok(Arc::new(self.group_statistics(group))),
                None => internal_err!("LanceScanExec: no partition {p}"),
            },
            None => {
                let stats = self
                    .group_rows
                    .iter()
                    .map(|&g| self.group_statistics(g))
                    .reduce(|a, b| Statistics {
                        num_rows: a.num_rows.add(&b.num_rows),
                        total_byte_size: a.total_byte_size.add(&b.total_byte_size),
                        column_statistics: a.column_statistics,
                    })
                    .unwrap_or_else(|| Statistics::new_unknown(&self.schema));
                Ok(Arc::new(stats))
            }
        }
    }
}

/// Everything one partition needs to open its Lance stream.
struct ScanRequest {
    location: TableLocation,
    snapshot: Snapshot,
    fragments: Vec<u64>,
    columns: Vec<String>,
    filter: Option<Expr>,
    limit: Option<usize>,
    options: ScanOptions,
}

impl ScanRequest {
    async fn open(
        self,
        context: Arc<TaskContext>,
        metrics: ScanMetrics,
    ) -> DFResult<SendableRecordBatchStream> {
        let display = self.location.display_uri.clone();
        let lance_err = |e| DataFusionError::from(Error::lance("scanning", &display, e));
        let cache = LanceSessionCache::for_task(&context);
        let params = cache.params_for(&self.location);
        let dataset = cache
            .open_snapshot(&self.location.uri, &params, &self.snapshot)
            .await?;
        // Looked up in the manifest's list without `Dataset::get_fragment`,
        // which clones the dataset per fragment.
        let all = dataset.fragments();
        let mut fragments = Vec::with_capacity(self.fragments.len());
        for &id in &self.fragments {
            let Some((_, fragment)) = fragment_by_id(all, id) else {
                return internal_err!(
                    "fragment {id} is not in version {} of '{display}'",
                    self.snapshot.version
                );
            };
            fragments.push(fragment.clone());
        }
        let mut scanner = dataset.scan();
        scanner.with_fragments(fragments);
        scanner.project(&self.columns).map_err(lance_err)?;
        if self.options.row_id {
            scanner.with_row_id();
        }
        if self.options.row_addr {
            scanner.with_row_address();
        }
        if let Some(filter) = &self.filter {
            scanner.filter_expr(filter.clone());
        }
        if let Some(limit) = self.limit {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            scanner.limit(Some(limit), None).map_err(lance_err)?;
        }
        if let Some(bytes) = self.options.batch_size_bytes {
            scanner.batch_size_bytes(bytes);
        }
        scanner
            .batch_size(self.options.batch_size.max(1))
            .scan_in_order(false)
            .use_scalar_index(self.options.use_scalar_index);
        if let Some(n) = self.options.fragment_readahead {
            scanner.fragment_readahead(n);
        }
        if let Some(n) = self.options.batch_readahead {
            scanner.batch_readahead(n);
        }
        if let Some(n) = self.options.io_buffer_size {
            scanner.io_buffer_size(n);
        }
        let plan = scanner.create_plan().await.map_err(lance_err)?;
        let plan: Arc<dyn ExecutionPlan> = if plan.properties().partitioning.partition_count() == 1
        {
            plan
        } else {
            Arc::new(CoalescePartitionsExec::new(plan))
        };
        let stream = plan.execute(0, context)?;
        let schema = stream.schema();
        let harvest = HarvestOnDrop::new(plan, metrics);
        let stream = stream.map(move |batch| {
            let _ = &harvest;
            batch
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Gives a Lance batch the exact schema the plan promised (field metadata and
/// nullability as registered), checking column types.
pub(crate) fn conform(batch: RecordBatch, schema: &SchemaRef) -> DFResult<RecordBatch> {
    if batch.schema_ref() == schema {
        return Ok(batch);
    }
    if batch.num_columns() != schema.fields().len() {
        return internal_err!(
            "Lance returned {} columns, expected {}",
            batch.num_columns(),
            schema.fields().len()
        );
    }
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        if !types_compatible(field.data_type(), column.data_type()) {
            return Err(Error::schema_mismatch(format!(
                "column '{}' is {} in this table version but was registered as {}; \
                 re-register the table to pick up schema changes",
                field.name(),
                column.data_type(),
                field.data_type()
            ))
            .into());
        }
    }
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        batch.columns().to_vec(),
        &options,
    )?)
}

fn types_compatible(expected: &DataType, actual: &DataType) -> bool {
    expected.equals_datatype(actual)
}
