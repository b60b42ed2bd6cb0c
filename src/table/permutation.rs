//! Permutation plans as statements: building one
//! ([`BuildPermutation`]: base pinned at planning, the plan written by the
//! crate's writer and created by one commit) and reading a split of one
//! ([`ReadPermutation`]: the plan validated at planning, the base read at
//! the version it records).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::TableReference;
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::physical_plan::ExecutionPlan;
use lance::Dataset;

use super::lookup::{Target, registered_target};
use super::statement::{Pinner, Statement, StatementTable};
use crate::config::{LanceConfig, LanceTableOptions, VersionSpec};
use crate::error::{Error, Result};
use crate::location::{Snapshot, TableLocation, normalize_uri, redact_uri};
use crate::physical_plan::permutation_build::build_schema;
use crate::physical_plan::permutation_format::{
    BASE_TIMESTAMP_KEY, BASE_URI_KEY, BASE_VERSION_KEY, HASH_KEY, HASH_NAME, OPTIONS_KEY,
    SPLIT_NAMES_KEY, plan_schema,
};
use crate::physical_plan::permutation_split::base_scanner;
use crate::physical_plan::transaction::ensure_absent;
use crate::physical_plan::{
    BuildOptions, CommitKind, LanceCommitExec, LanceWriteExec, PermutationBuildExec,
    PermutationRead, PermutationScanExec, PermutationSplitExec, PlanSummary, SplitStrategy,
    WriteTarget,
};
use crate::session::LanceSessionCache;
use crate::session::catalog_tables::{CatalogTable, catalog_tables};

/// The base of a build, pinned: plain data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pinned {
    pub(crate) location: TableLocation,
    pub(crate) snapshot: Snapshot,
    /// The commit time of that version (ns).
    pub(crate) timestamp_nanos: u128,
}

impl Pinned {
    fn of(location: TableLocation, dataset: &Dataset) -> Self {
        Self {
            location,
            snapshot: Snapshot::of(dataset),
            timestamp_nanos: dataset.manifest().timestamp_nanos,
        }
    }
}

/// `lance_build_permutation(base, plan, ...)` (see [`crate::udtf`]).
pub(crate) struct BuildPermutation {
    pub(crate) base: String,
    pub(crate) plan: String,
    pub(crate) options: BuildOptions,
    pub(crate) pinned: Option<Pinned>,
}

impl fmt::Debug for BuildPermutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildPermutation")
            .field("base", &redact_uri(&self.base))
            .field("plan", &redact_uri(&self.plan))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl BuildPermutation {
    pub(crate) fn provider(
        base: String,
        plan: String,
        options: BuildOptions,
    ) -> Arc<dyn TableProvider> {
        StatementTable::provider(Self {
            base,
            plan,
            options,
            pinned: None,
        })
    }

    /// The base at the version this statement reads: a registered Lance
    /// table (pinned by `pinner` when given), or a location's latest.
    async fn pin_base(
        &self,
        pinner: Option<&mut dyn Pinner>,
        state: &dyn Session,
    ) -> DFResult<Pinned> {
        if let Some(pinned) = &self.pinned {
            return Ok(pinned.clone());
        }
        let cache = LanceSessionCache::for_config(state.config());
        match registered_target(state, &TableReference::from(self.base.as_str())).await? {
            Some(Target::Lance(table)) => {
                let table = match pinner {
                    Some(pinner) => pinner.table(&table).await?,
                    None => table,
                };
                cache.register_params(table.location(), table.store_params());
                let dataset = table.snapshot(state).await?;
                Ok(Pinned::of(table.location().clone(), &dataset))
            }
            Some(Target::Cloud(cloud)) => Err(Error::not_supported(format!(
                "lance_build_permutation: '{}' ({}) is a LanceDB table; build its plan from a \
                 Lance table or location",
                self.base,
                cloud.display_uri()
            ))
            .into()),
            None => {
                let location = TableLocation::new(normalize_uri(&self.base)?, Default::default());
                let dataset = cache
                    .open(
                        &location.uri,
                        &cache.params_for(&location),
                        &VersionSpec::Latest,
                    )
                    .await
                    .map_err(|e| match e {
                        Error::DatasetNotFound { .. } => Error::not_found(format!(
                            "lance_build_permutation: '{}' is neither a Lance table nor a Lance \
                             dataset location",
                            redact_uri(&self.base)
                        )),
                        other => other,
                    })?;
                Ok(Pinned::of(location, &dataset))
            }
        }
    }

    /// Where the plan goes: a location holding no table, or a new table
    /// of a Lance catalog (whose namespace entry is made once the plan is
    /// committed).
    async fn plan_location(
        &self,
        state: &dyn Session,
    ) -> DFResult<(TableLocation, Option<CatalogTable>)> {
        let statement = format!("permutation plan '{}'", redact_uri(&self.plan));
        // A name (or, where quoted paths are tables, a path) of a table.
        let reference = TableReference::from(self.plan.as_str());
        if let Some(target) = registered_target(state, &reference).await? {
            let shown = match target {
                Target::Lance(t) => t.location().display_uri.clone(),
                Target::Cloud(t) => t.display_uri().to_string(),
            };
            return Err(Error::already_exists(format!(
                "{statement}: a table exists there ({shown}); a plan is built into a new \
                 location or table"
            ))
            .into());
        }
        // A new name in a catalog's schema is a new table there, never a
        // relative path.
        if reference.schema().is_some()
            && let Some(state) = state.as_any().downcast_ref::<SessionState>()
            && state.schema_for_ref(reference.clone()).is_ok()
        {
            let defaults = &state.config_options().catalog;
            let name = reference.resolve(&defaults.default_catalog, &defaults.default_schema);
            let placed = match catalog_tables(state.config(), &name.to_string()) {
                Ok(tables) => {
                    tables
                        .place(&statement, &name.catalog, &name.schema, &name.table)
                        .await?
                }
                Err(_) => None,
            };
            let Some(placed) = placed else {
                return Err(Error::not_supported(format!(
                    "{statement}: catalog '{}' is not a Lance catalog; build the plan into a \
                     table of a Lance catalog or into a location (a path or URI)",
                    name.catalog
                ))
                .into());
            };
            let location = TableLocation::new(placed.uri, placed.storage_options);
            return Ok((location, Some(placed.table)));
        }
        let location = TableLocation::new(normalize_uri(&self.plan)?, Default::default());
        Ok((location, None))
    }
}

/// The plan's schema metadata: LanceDB's keys and this crate's.
fn plan_metadata(pinned: &Pinned, options: &BuildOptions) -> HashMap<String, String> {
    let mut metadata = HashMap::from([
        (
            BASE_VERSION_KEY.to_string(),
            pinned.snapshot.version.to_string(),
        ),
        (
            BASE_URI_KEY.to_string(),
            pinned.location.display_uri.clone(),
        ),
        (
            BASE_TIMESTAMP_KEY.to_string(),
            pinned.timestamp_nanos.to_string(),
        ),
        (OPTIONS_KEY.to_string(), options.to_string()),
    ]);
    if !options.names.is_empty() {
        metadata.insert(
            SPLIT_NAMES_KEY.to_string(),
            serde_json::to_string(&options.names).unwrap_or_default(),
        );
    }
    if matches!(options.strategy, SplitStrategy::Hash { .. }) {
        metadata.insert(HASH_KEY.to_string(), HASH_NAME.to_string());
    }
    metadata
}

#[async_trait]
impl Statement for BuildPermutation {
    fn schema(&self) -> SchemaRef {
        build_schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        let pinned = self.pin_base(None, state).await?;
        let (plan, catalog_table) = self.plan_location(state).await?;
        let shown = plan.display_uri.clone();
        let cache = LanceSessionCache::for_config(state.config());
        let dataset = cache
            .open_snapshot(
                &pinned.location.uri,
                &cache.params_for(&pinned.location),
                &pinned.snapshot,
            )
            .await?;
        // A bad filter, column or expression is refused now, before any
        // row is read or written.
        let scanner = base_scanner(&dataset, &self.options)
            .map_err(|e| e.prefixed(&format!("permutation plan '{shown}'")))?;
        scanner.create_plan().await.map_err(|e| {
            let mut inputs = Vec::new();
            if let SplitStrategy::Calculated { expr } = &self.options.strategy {
                inputs.push(format!("expr '{expr}'"));
            }
            if let Some(filter) = &self.options.filter {
                inputs.push(format!("filter '{filter}'"));
            }
            Error::invalid_input(format!(
                "permutation plan '{shown}': {}: {}",
                inputs.join(" / "),
                crate::error::plain(&e)
            ))
        })?;
        let settings = LanceConfig::from_options(state.config_options());
        let schema = plan_schema(plan_metadata(&pinned, &self.options));
        let target = Arc::new(
            WriteTarget::new(
                shown.clone(),
                plan.clone(),
                None,
                Arc::clone(&schema),
                &settings,
                &LanceTableOptions::default(),
            )
            .in_order(),
        );
        ensure_absent(&target.open_for(state.config())).await?;
        let split = Arc::new(PermutationSplitExec::new(
            shown,
            pinned.location.clone(),
            pinned.snapshot.clone(),
            self.options.clone(),
            schema,
        ));
        let write = Arc::new(LanceWriteExec::new(split, Arc::clone(&target)));
        let commit = Arc::new(LanceCommitExec::new(write, target, CommitKind::Create));
        Ok(Arc::new(
            PermutationBuildExec::new(commit, plan, pinned.location).in_catalog(catalog_table),
        ))
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if self.pinned.is_some() {
            return Ok(None);
        }
        let pinned = self.pin_base(Some(pinner), state).await?;
        Ok(Some(StatementTable::provider(Self {
            base: self.base.clone(),
            plan: self.plan.clone(),
            options: self.options.clone(),
            pinned: Some(pinned),
        })))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}

/// `lance_permutation(plan, split, ...)`: one split of a validated plan.
#[derive(Debug)]
pub(crate) struct ReadPermutation {
    pub(crate) summary: Arc<PlanSummary>,
    pub(crate) split: usize,
    pub(crate) range: Range<u64>,
    pub(crate) partitions: usize,
}

impl ReadPermutation {
    /// Reads positions `range` of split `split` of `summary` in
    /// `partitions` contiguous parts.
    pub(crate) fn provider(
        summary: Arc<PlanSummary>,
        split: usize,
        range: Range<u64>,
        partitions: usize,
    ) -> Arc<dyn TableProvider> {
        StatementTable::provider(Self {
            summary,
            split,
            range,
            partitions,
        })
    }
}

/// `range` in `parts` contiguous ranges as equal as can be (none empty).
pub(crate) fn divide(range: &Range<u64>, parts: usize) -> Vec<Range<u64>> {
    let len = range.end - range.start;
    let parts = (parts as u64).min(len).max(1);
    let mut start = range.start;
    (0..parts)
        .map(|i| {
            let size = len / parts + u64::from(i < len % parts);
            let part = start..start + size;
            start += size;
            part
        })
        .filter(|r| !r.is_empty())
        .collect()
}

#[async_trait]
impl Statement for ReadPermutation {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.summary.base_schema)
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.scan(state, None).await
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let schema = match projection {
            Some(p) => Arc::new(self.summary.base_schema.project(p)?),
            None => Arc::clone(&self.summary.base_schema),
        };
        let s = &self.summary;
        let read = PermutationRead {
            plan: s.plan.clone(),
            plan_snapshot: s.plan_snapshot.clone(),
            base: s.base.clone(),
            base_snapshot: s.base_snapshot.clone(),
            split: self.split as u64,
            split_start: s.split_starts.as_ref().map(|starts| starts[self.split]),
            ranges: divide(&self.range, self.partitions),
            columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
            identity: s.identity(),
        };
        Ok(Arc::new(PermutationScanExec::new(read, schema)))
    }
}

/// Where a table function's argument names a table: a registered Lance
/// table (its store parameters registered for this process's tasks), else
/// a location.
pub(crate) fn named_location(state: &dyn Session, name: &str) -> Result<TableLocation> {
    let reference = TableReference::from(name);
    match super::lookup::registered_now(state, &reference) {
        // A name of a catalog's table is never taken for a path.
        Err(e) if matches!(reference, TableReference::Full { .. }) => Err(e),
        Ok(Some(Target::Lance(table))) => {
            LanceSessionCache::for_config(state.config())
                .register_params(table.location(), table.store_params());
            Ok(table.location().clone())
        }
        Ok(Some(Target::Cloud(cloud))) => Err(Error::not_supported(format!(
            "'{name}' ({}) is a LanceDB table: permutation plans are read from Lance tables",
            cloud.display_uri()
        ))),
        _ => Ok(TableLocation::new(normalize_uri(name)?, Default::default())),
    }
}

#[cfg(test)]
mod tests {
    use super::divide;

    #[test]
    fn ranges_divide_contiguously_and_cover_everything() {
        assert_eq!(divide(&(0..10), 3), [0..4, 4..7, 7..10]);
        assert_eq!(divide(&(5..7), 4), [5..6, 6..7]);
        assert_eq!(divide(&(3..3), 2), Vec::<std::ops::Range<u64>>::new());
    }
}
