//! Planning a scan of a [`LanceTableProvider`].

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::{conjunction, split_conjunction_owned};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::expressions::Column as ColumnExpr;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::GlobalLimitExec;
use datafusion::physical_plan::projection::ProjectionExec;

use lance_table::format::Fragment;

use super::index_rules::ColumnIndexes;
use super::{LanceTableProvider, index_prune, partition, pushdown};
use datafusion::arrow::datatypes::{DataType, Schema};

use crate::config::{FilterPushdown, LanceConfig};
use crate::location::Snapshot;
use crate::physical_plan::scan::{LanceScanExec, ScanOptions};
use datafusion::common::internal_err;

impl LanceTableProvider {
    /// True when the projection holds columns worth not decoding for rows a
    /// filter drops (Lance's late materialisation).
    fn reads_wide_columns(&self, output: &[usize]) -> bool {
        output.iter().any(|&i| {
            matches!(
                self.schema.field(i).data_type(),
                DataType::List(_)
                    | DataType::LargeList(_)
                    | DataType::FixedSizeList(_, _)
                    | DataType::Struct(_)
                    | DataType::Binary
                    | DataType::LargeBinary
                    | DataType::LargeUtf8
                    | DataType::Map(_, _)
            )
        })
    }

    pub(crate) async fn plan_scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let dataset = self.snapshot(state).await?;
        let settings = LanceConfig::from_options(state.config_options());
        let execution = &state.config_options().execution;

        let output: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.schema.fields().len()).collect(),
        };
        // Trailing row identity columns: `_rowid` (lance_rows) before `_rowaddr`.
        let row_addr_index = self.row_addr.then(|| self.schema.fields().len() - 1);
        let row_id_index = self
            .row_id
            .then(|| self.schema.fields().len().saturating_sub(2));
        let is_meta = |i: usize| Some(i) == row_addr_index || Some(i) == row_id_index;
        let with_row_addr = row_addr_index.is_some_and(|i| output.contains(&i));
        let with_row_id = row_id_index.is_some_and(|i| output.contains(&i));

        // Only filters classified Exact reach a scan; recheck anyway.
        let exact: Vec<Expr> = filters
            .iter()
            .filter(|f| pushdown::is_exact(f, &self.schema))
            .cloned()
            .collect();
        if exact.len() != filters.len() {
            return internal_err!("LanceTableProvider received a filter it did not accept");
        }
        // Who evaluates each conjunct: Lance (pushed into the scan) or
        // DataFusion (a FilterExec right above it).
        let indexes = if exact.is_empty() || !settings.use_scalar_index {
            ColumnIndexes::default()
        } else {
            ColumnIndexes::of(&dataset).await
        };
        let conjuncts: Vec<Expr> = exact
            .into_iter()
            .flat_map(split_conjunction_owned)
            .collect();
        let lance_filters = match settings.pushdown_filters {
            FilterPushdown::Lance => true,
            FilterPushdown::DataFusion => false,
            FilterPushdown::Auto => {
                self.reads_wide_columns(&output)
                    || conjuncts
                        .iter()
                        .flat_map(|c| c.column_refs())
                        .any(|c| indexes.covers(&c.name))
            }
        };
        // An index answers a filter with its own semantics: only audited
        // (predicate, index type) pairs go to Lance (see `index_rules`).
        let (lance_part, df_part): (Vec<Expr>, Vec<Expr>) = conjuncts
            .into_iter()
            .partition(|c| lance_filters && indexes.allows(c, &self.schema));
        // The indices Lance may answer the pushed filter from.
        let mut scalar_indexes: Vec<String> = Vec::new();
        if settings.use_scalar_index {
            for c in lance_part.iter().flat_map(|c| c.column_refs()) {
                for name in indexes.names_on(&c.name) {
                    if !scalar_indexes.contains(name) {
                        scalar_indexes.push(name.clone());
                    }
                }
            }
        }
        let (lance_filter, df_filter) = (conjunction(lance_part), conjunction(df_part));

        // Data columns Lance returns: the projection, plus the columns of the
        // filter DataFusion evaluates; the row id and address come last.
        let mut read: Vec<usize> = output.iter().copied().filter(|&i| !is_meta(i)).collect();
        if let Some(f) = &df_filter {
            for c in f.column_refs() {
                let i = self.schema.index_of(&c.name)?;
                if !read.contains(&i) && !is_meta(i) {
                    read.push(i);
                }
            }
        }
        let columns: Vec<String> = read
            .iter()
            .map(|&i| self.schema.field(i).name().clone())
            .collect();
        if with_row_id {
            read.extend(row_id_index);
        }
        if with_row_addr {
            read.extend(row_addr_index);
        }
        let read_schema = Arc::new(self.schema.project(&read)?);
        self.check_columns(&dataset, &columns)?;

        let partitions = match settings.scan_partitions {
            0 => execution.target_partitions,
            n => n,
        };
        // Fragments the indices rule out are not handed to Lance at all.
        let all_fragments = dataset.fragments();
        let kept = match (&lance_filter, scalar_indexes.is_empty()) {
            (Some(filter), false) if !indexes.unreadable() => {
                index_prune::candidate_fragments(&dataset, filter).await
            }
            _ => None,
        };
        let fragments: &[Fragment] = kept.as_deref().unwrap_or(all_fragments.as_slice());
        let pruned_fragments = all_fragments.len() - fragments.len();
        // The index already chose these fragments: Lance searches it again
        // only where that costs less than reading them.
        let search_again = kept
            .as_deref()
            .is_none_or(|kept| index_prune::search_again(kept, execution.batch_size));
        let groups = match (lance_filter.is_some() || df_filter.is_some(), limit) {
            // A limit without filter is answered by the first fragments.
            (false, Some(limit)) => {
                let prefix = partition::prefix_covering(fragments, limit);
                if prefix.is_empty() {
                    vec![]
                } else {
                    vec![prefix]
                }
            }
            _ => partition::group_fragments(fragments, partitions),
        };
        let (batch_size, batch_size_bytes) = match settings.batch_size {
            // Lance sizes each batch from the data it decodes and splits any
            // batch larger than twice its target: ask for half the bound.
            0 => (
                auto_batch_size(&read_schema, execution.batch_size),
                Some(AUTO_BATCH_BYTES as u64 / 2),
            ),
            n => (n, None),
        };
        let options = ScanOptions {
            batch_size,
            batch_size_bytes,
            fragment_readahead: match settings.fragment_readahead {
                // Each partition reads its own fragments: on local disk one
                // fragment ahead is fastest for big fragments (measured:
                // Q1-like 0.41 s -> 0.38 s), more for small ones; object
                // stores keep Lance's deeper default to hide latency.
                0 if !self.location.uri.contains("://") => {
                    Some(auto_fragment_readahead(fragments, batch_size))
                }
                0 => None,
                n => Some(n),
            },
            batch_readahead: (settings.batch_readahead > 0).then_some(settings.batch_readahead),
            io_buffer_size: (settings.io_buffer_size > 0).then_some(settings.io_buffer_size),
            // An unreadable index list: Lance must not use indices either;
            // nor once they narrowed the scan to one batch at planning.
            use_scalar_index: settings.use_scalar_index && !indexes.unreadable() && search_again,
            row_addr: with_row_addr,
            row_id: with_row_id,
            scalar_indexes,
            pruned_fragments,
        };
        // The limit goes to Lance only when no filter runs above the scan.
        let scan_limit = if df_filter.is_none() { limit } else { None };
        // Tasks open the version through the session, finding these store
        // parameters by location.
        self.session_cache(state)
            .register_params(&self.location, &self.params);
        let mut plan: Arc<dyn ExecutionPlan> = Arc::new(LanceScanExec::new(
            self.location.clone(),
            Snapshot::of(&dataset),
            groups,
            columns,
            Arc::clone(&read_schema),
            lance_filter,
            scan_limit,
            options,
        ));

        // DataFusion evaluates the rest of the filters the plan declared exact.
        if let Some(filter) = &df_filter {
            let df_schema = DFSchema::try_from(read_schema.as_ref().clone())?;
            let predicate = state.create_physical_expr(filter.clone(), &df_schema)?;
            plan = Arc::new(FilterExec::try_new(predicate, plan)?);
        }
        // Columns in the order asked for (dropping filter-only columns).
        if read != output {
            let exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = output
                .iter()
                .map(|o| {
                    let position = read
                        .iter()
                        .position(|r| r == o)
                        .expect("read covers output");
                    let name = self.schema.field(*o).name().clone();
                    (
                        Arc::new(ColumnExpr::new(&name, position)) as Arc<dyn PhysicalExpr>,
                        name,
                    )
                })
                .collect();
            plan = Arc::new(ProjectionExec::try_new(exprs, plan)?);
        }
        if let (Some(_), Some(limit)) = (&df_filter, limit) {
            plan = Arc::new(GlobalLimitExec::new(
                Arc::new(CoalescePartitionsExec::new(plan)),
                0,
                Some(limit),
            ));
        }
        Ok(plan)
    }
}

/// Most fragments a partition opens ahead automatically.
const MAX_AUTO_READAHEAD: usize = 32;

/// Fragments each partition opens ahead on local disk: enough to keep about
/// one batch of rows in flight — one when a fragment holds a batch or more,
/// up to [`MAX_AUTO_READAHEAD`] for tiny fragments, whose cost is opening
/// them, not reading them.
fn auto_fragment_readahead(fragments: &[Fragment], batch_size: usize) -> usize {
    let rows: usize = fragments.iter().map(partition::live_rows).sum();
    let mean = (rows / fragments.len().max(1)).max(1);
    batch_size.div_ceil(mean).clamp(1, MAX_AUTO_READAHEAD)
}

/// Most bytes per scanned batch with the automatic batch size (unless a
/// single row is larger).
pub(crate) const AUTO_BATCH_BYTES: usize = 2 * 1024 * 1024;
/// The automatic batch size grows `datafusion.execution.batch_size` at most
/// this many times.
const AUTO_BATCH_GROWTH: usize = 4;

/// The most rows per scanned batch when `lance.batch_size = 0`.
///
/// Lance decodes a batch per call; for narrow rows (fixed-width values and
/// short strings) larger batches halve its per-batch overhead (measured:
/// TPC-H Q1-like on v2.2 data 0.38 s -> 0.35 s with 4x the rows). Rows holding
/// lists, structs, large strings or binaries keep DataFusion's batch size, as
/// do rows wider than [`AUTO_BATCH_BYTES`] / batch size. This is only the row
/// cap: the bytes per batch are bounded by Lance from the decoded data (see
/// `ScanOptions::batch_size_bytes`), so long strings give fewer rows.
pub(crate) fn auto_batch_size(schema: &Schema, batch_size: usize) -> usize {
    let mut row_bytes = 0usize;
    for field in schema.fields() {
        let data_type = field.data_type();
        row_bytes += match data_type {
            DataType::Utf8 | DataType::Binary => 16,
            DataType::Boolean => 1,
            _ => match data_type.primitive_width() {
                Some(width) => width,
                None => return batch_size,
            },
        };
    }
    let rows = AUTO_BATCH_BYTES / row_bytes.max(1);
    rows.clamp(batch_size, batch_size.saturating_mul(AUTO_BATCH_GROWTH))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::Field;

    use super::*;

    fn schema(types: &[DataType]) -> Schema {
        Schema::new(
            types
                .iter()
                .enumerate()
                .map(|(i, t)| Field::new(format!("c{i}"), t.clone(), true))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn small_fragments_are_opened_further_ahead() {
        let frags = |n: u64, rows: usize| -> Vec<Fragment> {
            (0..n)
                .map(|id| {
                    let mut f = Fragment::new(id);
                    f.physical_rows = Some(rows);
                    f
                })
                .collect()
        };
        // Fragments of a batch or more: one ahead.
        assert_eq!(auto_fragment_readahead(&frags(66, 150_000), 32768), 1);
        assert_eq!(auto_fragment_readahead(&frags(3, 32768), 32768), 1);
        // Small ones: about a batch of rows in flight, capped.
        assert_eq!(auto_fragment_readahead(&frags(100, 4096), 32768), 8);
        assert_eq!(auto_fragment_readahead(&frags(100_000, 10), 32768), 32);
        assert_eq!(auto_fragment_readahead(&[], 32768), 32);
    }

    #[test]
    fn narrow_rows_get_larger_batches() {
        let q1 = schema(&[
            DataType::Float64,
            DataType::Float64,
            DataType::Utf8,
            DataType::Date32,
        ]);
        assert_eq!(auto_batch_size(&q1, 8192), 32768);
        assert_eq!(auto_batch_size(&schema(&[DataType::Int64]), 1000), 4000);
    }

    #[test]
    fn wide_or_nested_rows_keep_the_batch_size() {
        let wide = schema(&vec![DataType::Float64; 200]);
        assert_eq!(auto_batch_size(&wide, 8192), 8192);
        let vector = schema(&[
            DataType::Int64,
            DataType::new_fixed_size_list(DataType::Float32, 768, true),
        ]);
        assert_eq!(auto_batch_size(&vector, 8192), 8192);
        assert_eq!(auto_batch_size(&schema(&[DataType::LargeUtf8]), 8192), 8192);
    }
}
