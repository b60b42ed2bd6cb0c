//! [`CloudScanExec`]: reads one version of a LanceDB Cloud or Enterprise
//! table (`db://`) through the service's query requests, one row range per
//! partition.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::common::stats::Precision;
use datafusion::common::{ColumnStatistics, Statistics, internal_err};
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, RecordOutput,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};

use crate::cloud::{CloudClient, CloudTable, Page};
use crate::error::Error;
use crate::physical_plan::scan::conform;

/// Rows `offset .. offset + rows` of the filtered table version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRange {
    /// The first row.
    pub offset: u64,
    /// How many rows.
    pub rows: u64,
}

/// Everything a [`CloudScanExec`] reads, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudScanParts {
    pub table: CloudTable,
    pub version: u64,
    /// One range per partition.
    pub ranges: Vec<RowRange>,
    /// The columns asked for (one, when the output has none: rows are counted).
    pub columns: Vec<String>,
    /// The output schema.
    pub schema: SchemaRef,
    /// The filter the service evaluates, as Lance SQL.
    pub filter: Option<String>,
}

/// Reads one pinned version of a `db://` table: each partition asks the
/// service for its row range of the filtered version, in pages of
/// `read_rows_per_request` rows.
#[derive(Debug)]
pub struct CloudScanExec {
    parts: CloudScanParts,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl CloudScanExec {
    /// The scan `parts` describe; no range means one empty partition.
    pub(crate) fn new(mut parts: CloudScanParts) -> Self {
        if parts.ranges.is_empty() {
            parts.ranges.push(RowRange { offset: 0, rows: 0 });
        }
        let properties = Arc::new(
            PlanProperties::new(
                EquivalenceProperties::new(Arc::clone(&parts.schema)),
                Partitioning::UnknownPartitioning(parts.ranges.len()),
                EmissionType::Incremental,
                Boundedness::Bounded,
            )
            .with_scheduling_type(SchedulingType::Cooperative),
        );
        Self {
            parts,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Everything the scan reads.
    pub(crate) fn parts(&self) -> &CloudScanParts {
        &self.parts
    }

    /// The table version read.
    pub fn version(&self) -> u64 {
        self.parts.version
    }

    /// The filter the service evaluates, as Lance SQL.
    pub fn filter(&self) -> Option<&str> {
        self.parts.filter.as_deref()
    }

    fn total_rows(&self) -> u64 {
        self.parts.ranges.iter().map(|r| r.rows).sum()
    }

    fn statistics_of(&self, rows: u64) -> Statistics {
        Statistics {
            num_rows: Precision::Exact(rows as usize),
            total_byte_size: Precision::Absent,
            column_statistics: vec![
                ColumnStatistics::new_unknown();
                self.parts.schema.fields().len()
            ],
        }
    }
}

impl DisplayAs for CloudScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        let projection = p
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let (start, sep, end) = match t {
            DisplayFormatType::TreeRender => ("", "\n", "\n"),
            _ => ("CloudScanExec: ", ", ", ""),
        };
        write!(
            f,
            "{start}table={}{sep}version={}{sep}partitions={}{sep}rows={}{sep}projection=[{projection}]",
            p.table.location.display_uri,
            p.version,
            p.ranges.len(),
            self.total_rows()
        )?;
        if let Some(filter) = &p.filter {
            write!(f, "{sep}filter={filter}")?;
        }
        if matches!(t, DisplayFormatType::Verbose) {
            let ranges: Vec<_> = p
                .ranges
                .iter()
                .map(|r| format!("{}..{}", r.offset, r.offset + r.rows))
                .collect();
            write!(f, ", ranges=[{}]", ranges.join(", "))?;
        }
        write!(f, "{end}")
    }
}

impl ExecutionPlan for CloudScanExec {
    fn name(&self) -> &str {
        "CloudScanExec"
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
            internal_err!("CloudScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let Some(&range) = self.parts.ranges.get(partition) else {
            return internal_err!(
                "CloudScanExec: partition {partition} requested, {} available",
                self.parts.ranges.len()
            );
        };
        let schema = Arc::clone(&self.parts.schema);
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        let requests = MetricBuilder::new(&self.metrics).counter("requests", partition);
        let pages = Pages {
            parts: self.parts.clone(),
            client: None,
            next: range.offset,
            end: range.offset + range.rows,
            requests,
        };
        let out = Arc::clone(&schema);
        let stream = futures::stream::try_unfold(pages, Pages::next_page)
            .map_ok(|batches| futures::stream::iter(batches.into_iter().map(Ok)))
            .try_flatten()
            .map(move |batch: DFResult<RecordBatch>| {
                let _timer = baseline.elapsed_compute().timer();
                Ok(shape(batch?, &out)?.record_output(&baseline))
            });
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            schema, stream,
        ))))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DFResult<Arc<Statistics>> {
        let rows = match partition {
            Some(p) => match self.parts.ranges.get(p) {
                Some(range) => range.rows,
                None => return internal_err!("CloudScanExec: no partition {p}"),
            },
            None => self.total_rows(),
        };
        Ok(Arc::new(self.statistics_of(rows)))
    }
}

/// The pages one partition still has to fetch.
struct Pages {
    parts: CloudScanParts,
    client: Option<Arc<CloudClient>>,
    next: u64,
    end: u64,
    requests: Count,
}

impl Pages {
    async fn next_page(mut self) -> DFResult<Option<(Vec<RecordBatch>, Self)>> {
        if self.next >= self.end {
            return Ok(None);
        }
        let client = match &self.client {
            Some(client) => Arc::clone(client),
            None => {
                let client = Arc::new(CloudClient::connect(&self.parts.table)?);
                self.client = Some(Arc::clone(&client));
                client
            }
        };
        let rows = (self.end - self.next).min(u64::from(self.parts.table.requests.read_rows));
        let page = Page {
            version: self.parts.version,
            offset: self.next,
            rows: rows as u32,
            columns: &self.parts.columns,
            filter: self.parts.filter.as_deref(),
        };
        self.requests.add(1);
        let batches = client.query(&page).await?;
        let got: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        if got == 0 {
            return Err(Error::Cloud {
                message: format!(
                    "LanceDB table '{}': version {} ended at row {} of the {} rows its count \
                     promised",
                    self.parts.table.location.display_uri, self.parts.version, self.next, self.end
                ),
                status: None,
            }
            .into());
        }
        // A service may answer fewer rows than asked for: the next page
        // starts where this one ended. More rows than asked are cut.
        let mut batches = batches;
        if got > rows {
            let mut keep = rows as usize;
            for batch in &mut batches {
                let take = batch.num_rows().min(keep);
                *batch = batch.slice(0, take);
                keep -= take;
            }
        }
        self.next += got.min(rows);
        Ok(Some((batches, self)))
    }
}

/// The batch in the output schema (no columns: its row count only).
fn shape(batch: RecordBatch, schema: &SchemaRef) -> DFResult<RecordBatch> {
    if schema.fields().is_empty() {
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        return Ok(RecordBatch::try_new_with_options(
            Arc::clone(schema),
            vec![],
            &options,
        )?);
    }
    conform(batch, schema)
}
