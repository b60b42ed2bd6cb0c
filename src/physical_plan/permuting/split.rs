//! [`PermutationSplitExec`]: the rows of a permutation plan being built —
//! it reads the base at one version (its row ids, and the columns a hash or
//! calculated split needs), assigns them to splits and emits
//! `(row_id, split_id)` in plan order, from one partition, for
//! [`crate::physical_plan::LanceWriteExec`] to write.
//!
//! The row ids it holds (8 bytes a row, and 8 more for a hash or calculated
//! split) are reserved from the statement's memory pool, so a memory limit
//! bounds a build: past it the build fails with "resources exhausted" and
//! writes nothing.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef, UInt64Type};
use datafusion::common::internal_err;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use lance::Dataset;
use lance::dataset::scanner::Scanner;

use super::assign::{Keys, assign};
use super::format::{BuildOptions, SplitStrategy, hash_rows};
use crate::error::Error;
use crate::location::{Snapshot, TableLocation};
use crate::session::LanceSessionCache;

/// The column a calculated split's expression is read into.
const SPLIT_EXPR_COLUMN: &str = "__permutation_split";

/// Assigns a base's rows to splits (see the module docs).
#[derive(Debug)]
pub struct PermutationSplitExec {
    plan: String,
    base: TableLocation,
    base_snapshot: Snapshot,
    options: BuildOptions,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl PermutationSplitExec {
    /// The plan `plan` (named in messages) of `base` at `base_snapshot`,
    /// built with `options`, as rows of `schema` (the plan's, with its
    /// metadata).
    pub(crate) fn new(
        plan: String,
        base: TableLocation,
        base_snapshot: Snapshot,
        options: BuildOptions,
        schema: SchemaRef,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            plan,
            base,
            base_snapshot,
            options,
            schema,
            properties,
        }
    }

    /// The plan being built, as messages name it.
    pub fn plan(&self) -> &str {
        &self.plan
    }

    /// The base and the version read.
    pub fn base(&self) -> (&TableLocation, &Snapshot) {
        (&self.base, &self.base_snapshot)
    }

    /// How the plan is built.
    pub fn options(&self) -> &BuildOptions {
        &self.options
    }
}

impl DisplayAs for PermutationSplitExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PermutationSplitExec: base={}, base_version={}, {}",
            self.base.display_uri, self.base_snapshot.version, self.options
        )
    }
}

impl ExecutionPlan for PermutationSplitExec {
    fn name(&self) -> &str {
        "PermutationSplitExec"
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
            internal_err!("PermutationSplitExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("PermutationSplitExec has one partition, {partition} requested");
        }
        let cache = LanceSessionCache::for_task(&context);
        let params = cache.params_for(&self.base);
        let base = self.base.clone();
        let snapshot = self.base_snapshot.clone();
        let options = self.options.clone();
        let plan = self.plan.clone();
        let schema = Arc::clone(&self.schema);
        let batch_size = context.session_config().batch_size().max(1);
        let mut reservation = MemoryConsumer::new(format!("PermutationSplitExec[{plan}]"))
            .register(context.memory_pool());
        let batches = async move {
            let dataset = cache
                .open_snapshot(&base.uri, &params, &snapshot)
                .await
                .map_err(DataFusionError::from)?;
            let (row_ids, keys) = read_base(&dataset, &options, &plan, &mut reservation).await?;
            let splits = assign(&options, &row_ids, keys).map_err(|e| {
                DataFusionError::from(Error::invalid_input(format!(
                    "permutation plan '{plan}': {e}"
                )))
            })?;
            drop(row_ids);
            let mut batches = Vec::new();
            for (split, ids) in splits.into_iter().enumerate() {
                for chunk in ids.chunks(batch_size) {
                    batches.push(RecordBatch::try_new(
                        Arc::clone(&schema),
                        vec![
                            Arc::new(UInt64Array::from(chunk.to_vec())),
                            Arc::new(UInt64Array::from(vec![split as u64; chunk.len()])),
                        ],
                    )?);
                }
            }
            // The batches stay reserved until the writer has taken them.
            let held: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
            reservation.try_resize(held)?;
            Ok::<_, DataFusionError>(futures::stream::iter(batches).map(move |batch| {
                let _held = &reservation;
                Ok::<_, DataFusionError>(batch)
            }))
        };
        let stream = futures::stream::once(batches).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }
}

/// The base scan a build reads with: row ids, the filter, and the columns
/// the strategy needs. Planning builds it too, to refuse a bad filter,
/// column or expression before anything runs.
pub(crate) fn base_scanner(dataset: &Dataset, options: &BuildOptions) -> crate::Result<Scanner> {
    let lance = |what: &str, e: lance::Error| {
        Error::invalid_input(format!("{what}: {}", crate::error::plain(&e)))
    };
    let mut scanner = dataset.scan();
    match &options.strategy {
        SplitStrategy::Hash { columns, .. } => {
            for column in columns {
                if dataset.schema().field(column).is_none() {
                    return Err(Error::invalid_input(format!(
                        "columns: the base has no column '{column}'"
                    )));
                }
            }
            scanner.project(columns).map_err(|e| lance("columns", e))?;
        }
        SplitStrategy::Calculated { expr } => {
            scanner
                .project_with_transform(&[(SPLIT_EXPR_COLUMN, expr.as_str())])
                .map_err(|e| lance(&format!("expr '{expr}'"), e))?;
        }
        _ => {
            scanner
                .project::<&str>(&[])
                .map_err(|e| lance("projection", e))?;
        }
    }
    scanner.with_row_id().scan_in_order(true);
    if let Some(filter) = &options.filter {
        scanner
            .filter(filter)
            .map_err(|e| lance(&format!("filter '{filter}'"), e))?;
    }
    Ok(scanner)
}

/// The base's row ids in its order, with the keys the strategy needs.
async fn read_base(
    dataset: &Dataset,
    options: &BuildOptions,
    plan: &str,
    reservation: &mut datafusion::execution::memory_pool::MemoryReservation,
) -> DFResult<(Vec<u64>, Keys)> {
    let scanner = base_scanner(dataset, options)
        .map_err(|e| e.prefixed(&format!("permutation plan '{plan}'")))?;
    let mut stream = scanner
        .try_into_stream()
        .await
        .map_err(|e| Error::lance("reading", dataset.uri(), e))?;
    let mut row_ids: Vec<u64> = Vec::new();
    let mut hashes: Vec<u64> = Vec::new();
    let mut splits: Vec<Option<i64>> = Vec::new();
    let per_row = match options.strategy {
        SplitStrategy::Hash { .. } | SplitStrategy::Calculated { .. } => 16,
        _ => 8,
    };
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| Error::lance("reading", dataset.uri(), e))?;
        reservation.try_grow(batch.num_rows() * per_row)?;
        let ids = batch
            .column_by_name(lance_core::ROW_ID)
            .ok_or_else(|| Error::invalid_input("internal: the base scan returned no _rowid"))?
            .as_primitive::<UInt64Type>();
        row_ids.extend(ids.values().iter().copied());
        match &options.strategy {
            SplitStrategy::Hash { columns, .. } => {
                let arrays: Vec<(&str, &Arc<dyn Array>)> = columns
                    .iter()
                    .map(|c| {
                        batch
                            .column_by_name(c)
                            .map(|a| (c.as_str(), a))
                            .ok_or_else(|| Error::invalid_input(format!("no column '{c}'")))
                    })
                    .collect::<Result<_, _>>()?;
                hashes.extend(hash_rows(&arrays, batch.num_rows()).map_err(|e| {
                    Error::invalid_input(format!("permutation plan '{plan}': {e}"))
                })?);
            }
            SplitStrategy::Calculated { expr } => {
                let column = batch
                    .column_by_name(SPLIT_EXPR_COLUMN)
                    .ok_or_else(|| Error::invalid_input("internal: no split column"))?;
                if !column.data_type().is_integer() {
                    return Err(Error::invalid_input(format!(
                        "permutation plan '{plan}': expr '{expr}' gives {}, not an integer",
                        column.data_type()
                    ))
                    .into());
                }
                let values = cast(column, &DataType::Int64)?;
                splits.extend(values.as_primitive::<Int64Type>().iter());
            }
            _ => {}
        }
    }
    let keys = match options.strategy {
        SplitStrategy::Hash { .. } => Keys::Hashes(hashes),
        SplitStrategy::Calculated { .. } => Keys::Splits(splits),
        _ => Keys::None,
    };
    Ok((row_ids, keys))
}
