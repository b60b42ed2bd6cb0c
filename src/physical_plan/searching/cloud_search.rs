//! [`CloudSearchExec`]: `lance_vector_search`, `lance_fts` and
//! `lance_hybrid_search` over a `db://` table, run by the service: one
//! `query` request per search (two for a hybrid search, fused here by
//! reciprocal rank as for local tables), all at the statement's version.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;

use super::cloud_query::{SearchScope, text_request, vector_request};
use super::hybrid::{Ranked, fuse};
use super::search::{
    DISTANCE_COLUMN, SCORE_COLUMN, SearchQuery, VectorQuery, bounded, fmt_text, fmt_vector,
};
use crate::cloud::{CloudClient, CloudTable};
use crate::error::Error;
use crate::physical_plan::scan::conform;

/// Values of `k`, `nprobes`, `ef` or `k × refine_factor` above this are
/// first bounded by the version's row count (one `count_rows` request), as
/// local searches bound them: a huge value is never sent.
const UNCOUNTED: usize = 1 << 16;

/// Everything a [`CloudSearchExec`] runs, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudSearchParts {
    /// The table as the statement names it.
    pub name: String,
    pub table: CloudTable,
    pub version: u64,
    /// The table columns returned (before the search's own).
    pub columns: Vec<String>,
    /// The search (its `filter`s unused: `filter` travels).
    pub query: SearchQuery,
    /// The prefilter, as Lance SQL.
    pub filter: Option<String>,
    /// `columns`, then `_distance`, `_score` and `_relevance` as the search adds.
    pub schema: SchemaRef,
}

/// A search of one version of a `db://` table, run by the service.
#[derive(Debug)]
pub struct CloudSearchExec {
    parts: CloudSearchParts,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl CloudSearchExec {
    pub(crate) fn new(parts: CloudSearchParts) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&parts.schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            parts,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    pub(crate) fn parts(&self) -> &CloudSearchParts {
        &self.parts
    }
}

impl DisplayAs for CloudSearchExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        write!(
            f,
            "CloudSearchExec: table={}, version={}, projection=[{}], ",
            p.table.location.display_uri,
            p.version,
            p.columns.join(", ")
        )?;
        match &p.query {
            SearchQuery::Vector(q) => fmt_vector(q, f)?,
            SearchQuery::FullText(q) => fmt_text(q, f)?,
            SearchQuery::Hybrid(q) => {
                write!(f, "hybrid=[")?;
                fmt_vector(&q.vector, f)?;
                write!(f, "; ")?;
                fmt_text(&q.text, f)?;
                write!(f, "], rrf_k={}", q.rrf_k)?;
            }
        }
        if let Some(filter) = &p.filter {
            write!(f, ", prefilter={filter}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for CloudSearchExec {
    fn name(&self) -> &str {
        "CloudSearchExec"
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
            internal_err!("CloudSearchExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("CloudSearchExec has one partition, {partition} requested");
        }
        let parts = self.parts.clone();
        let requests = MetricBuilder::new(&self.metrics).counter("requests", partition);
        let schema = Arc::clone(&parts.schema);
        let stream = futures::stream::once(async move { search(&parts, &requests).await })
            .flat_map(|found: DFResult<Vec<RecordBatch>>| {
                futures::stream::iter(match found {
                    Ok(batches) => batches.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                })
            });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Whether `query` holds a number large enough to bound first.
fn large(query: &SearchQuery) -> bool {
    let vector = |q: &VectorQuery| {
        q.k.saturating_mul(q.refine_factor.unwrap_or(1) as usize) > UNCOUNTED
            || q.nprobes.is_some_and(|n| n > UNCOUNTED)
            || q.ef.is_some_and(|n| n > UNCOUNTED)
    };
    match query {
        SearchQuery::Vector(q) => vector(q),
        SearchQuery::FullText(q) => q.limit.is_some_and(|n| n > UNCOUNTED),
        SearchQuery::Hybrid(q) => vector(&q.vector) || q.text.limit.is_some_and(|n| n > UNCOUNTED),
    }
}

/// The rows of the search `parts` describes, in its schema.
async fn search(parts: &CloudSearchParts, requests: &Count) -> DFResult<Vec<RecordBatch>> {
    let client = CloudClient::connect(&parts.table)?;
    let query = if large(&parts.query) {
        requests.add(1);
        let rows = client.count_rows(parts.version, None).await?;
        bounded(&parts.query, usize::try_from(rows).unwrap_or(usize::MAX))
    } else {
        parts.query.clone()
    };
    let scope = |row_id| SearchScope {
        version: parts.version,
        columns: &parts.columns,
        filter: parts.filter.as_deref(),
        row_id,
    };
    let shaped = |batches: Vec<RecordBatch>| -> DFResult<Vec<RecordBatch>> {
        batches
            .into_iter()
            .map(|b| conform(select(&b, &parts.schema)?, &parts.schema))
            .collect()
    };
    match &query {
        SearchQuery::Vector(q) => {
            requests.add(1);
            shaped(client.search(vector_request(q, scope(false))?).await?)
        }
        SearchQuery::FullText(q) => {
            requests.add(1);
            shaped(client.search(text_request(q, scope(false))?).await?)
        }
        SearchQuery::Hybrid(q) => {
            requests.add(2);
            let (vector, text) = futures::try_join!(
                client.search(vector_request(&q.vector, scope(true))?),
                client.search(text_request(&q.text, scope(true))?),
            )?;
            let ranked = |batches: Vec<RecordBatch>, score: &str| -> DFResult<Ranked> {
                let mut names = parts.columns.clone();
                names.extend([score.to_string(), "_rowid".to_string()]);
                let schema = ranked_schema(&parts.schema, &parts.columns, score, &batches)?;
                let batches = batches
                    .iter()
                    .map(|b| select_names(b, &names, &schema))
                    .collect::<DFResult<Vec<_>>>()?;
                Ranked::new(&batches, &schema, score)
            };
            let vector = ranked(vector, DISTANCE_COLUMN)?;
            let text = ranked(text, SCORE_COLUMN)?;
            let fused = fuse(
                &vector,
                &text,
                parts.columns.len(),
                q.vector.k,
                q.rrf_k,
                &parts.schema,
            )?;
            Ok(vec![conform(fused, &parts.schema)?])
        }
    }
}

/// The columns of `schema` (by name) from an answer `batch`.
fn select(batch: &RecordBatch, schema: &SchemaRef) -> DFResult<RecordBatch> {
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let fields: Vec<_> = names
        .iter()
        .map(|n| {
            batch
                .schema()
                .field_with_name(n)
                .cloned()
                .map_err(|_| missing(n))
        })
        .collect::<DFResult<_>>()?;
    select_names(batch, &names, &Arc::new(Schema::new(fields)))
}

/// Columns `names` of `batch`, as `schema` (theirs) says.
fn select_names(
    batch: &RecordBatch,
    names: &[String],
    schema: &SchemaRef,
) -> DFResult<RecordBatch> {
    let columns = names
        .iter()
        .map(|n| batch.column_by_name(n).cloned().ok_or_else(|| missing(n)))
        .collect::<DFResult<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &options,
    )?)
}

/// The schema of one half of a hybrid search: the node's columns, then the
/// half's score and `_rowid` as the service answered them.
fn ranked_schema(
    node: &SchemaRef,
    columns: &[String],
    score: &str,
    batches: &[RecordBatch],
) -> DFResult<SchemaRef> {
    let mut fields: Vec<_> = node.fields()[..columns.len()]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let Some(first) = batches.first() else {
        fields.push(Field::new(score, DataType::Float32, true));
        fields.push(Field::new("_rowid", DataType::UInt64, true));
        return Ok(Arc::new(Schema::new(fields)));
    };
    for name in [score, "_rowid"] {
        fields.push(
            first
                .schema()
                .field_with_name(name)
                .map_err(|_| missing(name))?
                .clone(),
        );
    }
    Ok(Arc::new(Schema::new(fields)))
}

fn missing(name: &str) -> datafusion::error::DataFusionError {
    Error::Cloud {
        message: format!("the service's answer has no column '{name}'"),
        status: None,
    }
    .into()
}
