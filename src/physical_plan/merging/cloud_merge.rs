//! [`CloudMergeExec`]: `lance_merge` / `MERGE INTO` into a LanceDB Cloud or
//! Enterprise table (`db://`), as the service's `merge_insert` requests.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
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

use crate::cloud::{CloudClient, CloudTable, MergeRequest, Merged};
use crate::error::Error;
use crate::physical_plan::merge_options::{MergeOutput, stats_schema};
use crate::physical_plan::merging::SourceKeys;
use crate::physical_plan::one_row::{count_batch, count_schema, one_row_properties};
use crate::physical_plan::scan::conform;

/// Everything a [`CloudMergeExec`] does, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudMergeParts {
    /// The table as the statement names it.
    pub name: String,
    pub table: CloudTable,
    /// The source's schema as sent (the table's types).
    pub schema: SchemaRef,
    pub merge: MergeRequest,
    pub output: MergeOutput,
}

/// Merges its input into a `db://` table. The whole source is read and its
/// keys checked (no key twice, no NULL in a NOT NULL key) before anything is
/// sent; then it goes in `merge_insert` requests of at most
/// `write_rows_per_request` rows / `write_bytes_per_request` bytes, each of
/// which makes one version. A merge that deletes target rows the source
/// does not match must fit in one request (it would otherwise delete the
/// rows later requests carry), and is refused before anything is sent
/// otherwise.
#[derive(Debug)]
pub struct CloudMergeExec {
    input: Arc<dyn ExecutionPlan>,
    parts: CloudMergeParts,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl CloudMergeExec {
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>, parts: CloudMergeParts) -> Self {
        let schema = match parts.output {
            MergeOutput::Stats => stats_schema(),
            MergeOutput::Count => count_schema(),
        };
        Self {
            input,
            parts,
            properties: one_row_properties(schema),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Everything the node does.
    pub(crate) fn parts(&self) -> &CloudMergeParts {
        &self.parts
    }
}

impl DisplayAs for CloudMergeExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        let m = &p.merge;
        let sep = if matches!(t, DisplayFormatType::TreeRender) {
            "\n"
        } else {
            write!(f, "CloudMergeExec: ")?;
            ", "
        };
        write!(
            f,
            "table={}{sep}on=[{}]{sep}update_all={}",
            p.table.location.display_uri,
            m.keys.join(", "),
            m.update_all
        )?;
        if let Some(filter) = &m.update_filter {
            write!(f, "{sep}update_if={filter}")?;
        }
        write!(f, "{sep}insert_all={}", m.insert_all)?;
        if m.delete_by_source {
            write!(f, "{sep}delete_by_source=true")?;
        }
        if let Some(filter) = &m.delete_filter {
            write!(f, "{sep}delete_by_source_if={filter}")?;
        }
        write!(f, "{sep}rows_per_request={}", p.table.requests.write_rows)
    }
}

impl ExecutionPlan for CloudMergeExec {
    fn name(&self) -> &str {
        "CloudMergeExec"
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
            Err(_) => internal_err!("CloudMergeExec has one child"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("CloudMergeExec has one partition, {partition} requested");
        }
        let input: Arc<dyn ExecutionPlan> =
            if self.input.output_partitioning().partition_count() == 1 {
                Arc::clone(&self.input)
            } else {
                Arc::new(CoalescePartitionsExec::new(Arc::clone(&self.input)))
            };
        let input = input.execute(0, context)?;
        let parts = self.parts.clone();
        let requests = MetricBuilder::new(&self.metrics).counter("requests", 0);
        let schema = self.schema();
        let stream = futures::stream::once(async move {
            let merged = run(&parts, input, &requests).await?;
            match parts.output {
                MergeOutput::Count => count_batch(merged.inserted + merged.updated),
                MergeOutput::Stats => Ok(RecordBatch::try_new(
                    stats_schema(),
                    [
                        merged.inserted,
                        merged.updated,
                        merged.deleted,
                        merged.version.unwrap_or_default(),
                    ]
                    .into_iter()
                    .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
                    .collect(),
                )?),
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Reads and checks the whole source, then sends it.
async fn run(
    parts: &CloudMergeParts,
    mut input: SendableRecordBatchStream,
    requests: &datafusion::physical_plan::metrics::Count,
) -> DFResult<Merged> {
    let schema = &parts.schema;
    let keys: Vec<usize> = parts
        .merge
        .keys
        .iter()
        .map(|k| schema.index_of(k))
        .collect::<Result<_, _>>()?;
    let mut seen = SourceKeys::new(schema, keys, (parts.name.as_str(), schema.as_ref()), false);
    let mut batches = Vec::new();
    let (mut rows, mut bytes) = (0usize, 0usize);
    while let Some(batch) = input.next().await {
        let batch = conform(batch?, schema)?;
        if batch.num_rows() == 0 {
            continue;
        }
        seen.add(&batch)?;
        rows += batch.num_rows();
        bytes += batch.get_array_memory_size();
        batches.push(batch);
    }
    seen.check(&batches)?;
    let policy = &parts.table.requests;
    let one_request = parts.merge.delete_by_source || parts.merge.delete_filter.is_some();
    if one_request && (rows as u64 > policy.write_rows || bytes as u64 > policy.write_bytes) {
        return Err(Error::not_supported(format!(
            "merge into {}: a merge that deletes the rows the source does not match is sent as \
             one request, and the source ({rows} rows, {bytes} bytes) does not fit in one \
             ({} rows or {} bytes per request); nothing was sent. Raise the table's \
             'write_rows_per_request' / 'write_bytes_per_request'",
            parts.name, policy.write_rows, policy.write_bytes
        ))
        .into());
    }
    let client = CloudClient::connect(&parts.table)?;
    let mut total = Merged::default();
    let mut versions = Vec::new();
    let mut chunks = chunk(
        batches,
        policy.write_rows as usize,
        policy.write_bytes as usize,
    );
    if chunks.is_empty() && one_request {
        // An empty source still deletes every unmatched target row.
        chunks.push((vec![RecordBatch::new_empty(Arc::clone(schema))], 0));
    }
    for (chunk, n) in chunks {
        requests.add(1);
        let merged = client
            .merge_insert(schema, &chunk, n, &parts.merge)
            .await
            .map_err(|e| {
                if versions.is_empty() {
                    e.prefixed(&format!("merge into {}", parts.name))
                } else {
                    e.prefixed(&format!(
                        "merge into {}: {} earlier requests were applied (versions {versions:?}; \
                         {} rows inserted, {} updated)",
                        parts.name,
                        versions.len(),
                        total.inserted,
                        total.updated
                    ))
                }
            })?;
        total.inserted += merged.inserted;
        total.updated += merged.updated;
        total.deleted += merged.deleted;
        total.version = merged.version.or(total.version);
        versions.extend(merged.version);
    }
    Ok(total)
}

/// `batches` as requests of at most `rows` rows and about `bytes` bytes:
/// each with its row count.
fn chunk(batches: Vec<RecordBatch>, rows: usize, bytes: usize) -> Vec<(Vec<RecordBatch>, usize)> {
    let mut out = Vec::new();
    let (mut current, mut n, mut size) = (Vec::new(), 0usize, 0usize);
    for batch in batches {
        let row_bytes = (batch.get_array_memory_size() / batch.num_rows().max(1)).max(1);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let room = (rows - n).min(bytes.saturating_sub(size) / row_bytes);
            if room == 0 && n > 0 {
                out.push((std::mem::take(&mut current), std::mem::take(&mut n)));
                size = 0;
                continue;
            }
            let take = room.max(1).min(batch.num_rows() - offset);
            current.push(batch.slice(offset, take));
            n += take;
            size += take * row_bytes;
            offset += take;
        }
    }
    if n > 0 {
        out.push((current, n));
    }
    out
}
