//! [`CloudWriteExec`]: `INSERT` into a LanceDB Cloud or Enterprise table
//! (`db://`), in requests of bounded rows and bytes.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::ExecutionPlanProperties;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, PlanProperties,
};
use futures::StreamExt;

use crate::cloud::{CloudClient, CloudTable};
use crate::error::Error;
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::scan::conform;

/// Everything a [`CloudWriteExec`] writes, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudWriteParts {
    /// The table as the statement names it.
    pub name: String,
    pub table: CloudTable,
    /// The table's schema: every batch is sent in it.
    pub schema: SchemaRef,
    /// `INSERT OVERWRITE`: the rows replace the table, in one request.
    pub overwrite: bool,
    /// `CREATE TABLE ... AS`: the first request creates the table.
    pub create: bool,
}

/// Sends its input's rows to a `db://` table: one `insert` request per
/// `write_rows_per_request` rows or `write_bytes_per_request` bytes,
/// whichever comes first. Each request makes one version; an `INSERT
/// OVERWRITE` must fit in one request (it is refused before anything is
/// sent otherwise). Returns the row count.
#[derive(Debug)]
pub struct CloudWriteExec {
    input: Arc<dyn ExecutionPlan>,
    parts: CloudWriteParts,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl CloudWriteExec {
    /// Writes `input` as `parts` say.
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, parts: CloudWriteParts) -> Self {
        Self {
            input,
            parts,
            properties: one_row_properties(count_schema()),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Everything the node writes.
    pub(crate) fn parts(&self) -> &CloudWriteParts {
        &self.parts
    }
}

impl DisplayAs for CloudWriteExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        let mode = match (p.create, p.overwrite) {
            (true, _) => "create",
            (_, true) => "overwrite",
            _ => "append",
        };
        let r = &p.table.requests;
        match t {
            DisplayFormatType::TreeRender => write!(
                f,
                "table={}\nmode={mode}\nrows_per_request={}\n",
                p.table.location.display_uri, r.write_rows
            ),
            _ => write!(
                f,
                "CloudWriteExec: table={}, mode={mode}, rows_per_request={}, \
                 bytes_per_request={}",
                p.table.location.display_uri, r.write_rows, r.write_bytes
            ),
        }
    }
}

impl ExecutionPlan for CloudWriteExec {
    fn name(&self) -> &str {
        "CloudWriteExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        match <[_; 1]>::try_from(children) {
            Ok([input]) => Ok(Arc::new(Self::new(input, self.parts.clone()))),
            Err(_) => internal_err!("CloudWriteExec has one child"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("CloudWriteExec has one partition, {partition} requested");
        }
        let input: Arc<dyn ExecutionPlan> =
            if self.input.output_partitioning().partition_count() == 1 {
                Arc::clone(&self.input)
            } else {
                Arc::new(CoalescePartitionsExec::new(Arc::clone(&self.input)))
            };
        let input = input.execute(0, context)?;
        let writer = Writer {
            parts: self.parts.clone(),
            rows: MetricBuilder::new(&self.metrics).counter("rows_written", 0),
            requests: MetricBuilder::new(&self.metrics).counter("requests", 0),
            batches: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            applied_rows: 0,
            versions: Vec::new(),
        };
        let stream = futures::stream::once(writer.run(input));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// The rows of one statement on their way to the service.
struct Writer {
    parts: CloudWriteParts,
    rows: datafusion::physical_plan::metrics::Count,
    requests: datafusion::physical_plan::metrics::Count,
    /// The next request's rows.
    batches: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    /// Rows the service has confirmed.
    applied_rows: u64,
    /// Versions the confirmed requests made.
    versions: Vec<u64>,
}

impl Writer {
    async fn run(mut self, mut input: SendableRecordBatchStream) -> DFResult<RecordBatch> {
        let client = CloudClient::connect(&self.parts.table)?;
        let max_rows = self.parts.table.requests.write_rows as usize;
        let max_bytes = self.parts.table.requests.write_bytes as usize;
        while let Some(batch) = input.next().await {
            let batch = conform(batch?, &self.parts.schema)?;
            if batch.num_rows() == 0 {
                continue;
            }
            let row_bytes = (batch.get_array_memory_size() / batch.num_rows()).max(1);
            if self.parts.overwrite {
                // One request or none: nothing is sent before every row is here.
                self.pending_rows += batch.num_rows();
                self.pending_bytes += batch.num_rows() * row_bytes;
                self.batches.push(batch);
                if self.pending_rows > max_rows || self.pending_bytes > max_bytes {
                    return Err(self.overwrite_too_big());
                }
                continue;
            }
            let mut offset = 0;
            while offset < batch.num_rows() {
                let room = (max_rows - self.pending_rows)
                    .min(max_bytes.saturating_sub(self.pending_bytes) / row_bytes);
                if room == 0 && self.pending_rows > 0 {
                    self.flush(&client).await?;
                    continue;
                }
                let take = room.max(1).min(batch.num_rows() - offset);
                self.batches.push(batch.slice(offset, take));
                self.pending_rows += take;
                self.pending_bytes += take * row_bytes;
                offset += take;
                if self.pending_rows >= max_rows || self.pending_bytes >= max_bytes {
                    self.flush(&client).await?;
                }
            }
        }
        if self.pending_rows > 0 || self.parts.overwrite || self.creates() {
            self.flush(&client).await?;
        }
        count_batch(self.applied_rows)
    }

    fn overwrite_too_big(&self) -> datafusion::error::DataFusionError {
        Error::not_supported(format!(
            "INSERT OVERWRITE {}: the rows do not fit in one request ({} rows or {} bytes per \
             request), and an overwrite is sent as one so that a failure cannot leave the \
             table half replaced; nothing was sent. Raise the table's \
             'write_rows_per_request' / 'write_bytes_per_request'",
            self.parts.name,
            self.parts.table.requests.write_rows,
            self.parts.table.requests.write_bytes
        ))
        .into()
    }

    /// Whether the next request creates the table.
    fn creates(&self) -> bool {
        self.parts.create && self.requests.value() == 0
    }

    /// Sends the pending rows in one request.
    async fn flush(&mut self, client: &CloudClient) -> DFResult<()> {
        let batches = std::mem::take(&mut self.batches);
        let rows = std::mem::take(&mut self.pending_rows);
        self.pending_bytes = 0;
        let mode = (self.parts.overwrite, self.creates());
        self.requests.add(1);
        let version = client
            .insert(&self.parts.schema, &batches, rows, mode)
            .await
            .map_err(|e| self.in_statement(e))?;
        self.applied_rows += rows as u64;
        self.rows.add(rows);
        self.versions.extend(version);
        Ok(())
    }

    /// `e`, with what earlier requests of the statement applied.
    fn in_statement(&self, e: Error) -> datafusion::error::DataFusionError {
        if self.versions.is_empty() {
            return e.into();
        }
        let created = if self.parts.create {
            " (the first created the table)"
        } else {
            ""
        };
        e.prefixed(&format!(
            "INSERT INTO {}: {} rows were applied by {} earlier requests{created} (versions {:?})",
            self.parts.name,
            self.applied_rows,
            self.versions.len(),
            self.versions
        ))
        .into()
    }
}
