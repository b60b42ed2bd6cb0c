//! `lance_vacuum('<table or location>' [, 'older_than=<duration>'] [, 'orphans_older_than=<duration>'])`:
//! removes old versions and unreferenced data files.
//!
//! 1. Versions older than `older_than` (default `7d`) are removed with
//!    Lance's `cleanup_old_versions` (the latest version and tagged versions
//!    are always kept), together with the files only they referenced.
//! 2. Data and deletion files that no remaining version references — left by
//!    a process killed mid-write or a dropped result stream — are deleted when
//!    they were last modified before `orphans_older_than` (default `7d`,
//!    Lance's own threshold).
//!
//! A statement in flight holds files that no version references yet. Those of
//! statements running in this process are always kept (the cutoff moves
//! before the oldest one's start); for writers in other processes,
//! `orphans_older_than` must exceed the longest statement that could still
//! commit, which is why it defaults to a week. Durations: `<n>s`, `<n>m`,
//! `<n>h`, `<n>d`. The work happens when the statement runs (`EXPLAIN` does
//! nothing); the result is one row: `versions_removed, files_removed,
//! orphans_removed, bytes_removed`.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{TimeDelta, Utc};
use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;

use super::versions::dataset_named;
use crate::error::Error;
use crate::physical_plan::action::ActionExec;
use crate::physical_plan::target::{oldest_in_flight, project};
use lance_table::io::deletion::relative_deletion_file_path;

/// SQL name of the vacuum function.
pub const VACUUM_FUNCTION_NAME: &str = "lance_vacuum";

/// `lance_vacuum(...)`.
#[derive(Debug, Default)]
pub struct VacuumFunction {}

/// Parses `30s`, `10m`, `2h`, `7d`.
pub(crate) fn parse_duration(key: &str, value: &str) -> Result<TimeDelta, Error> {
    let value = value.trim();
    let bad = || Error::invalid_option(key, value, "expected a duration like 30s, 10m, 2h or 7d");
    let split = value.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = value.split_at(split);
    let n: i64 = number.trim().parse().map_err(|_| bad())?;
    if n < 0 {
        return Err(bad());
    }
    match unit {
        "s" => Ok(TimeDelta::seconds(n)),
        "m" => Ok(TimeDelta::minutes(n)),
        "h" => Ok(TimeDelta::hours(n)),
        "d" => Ok(TimeDelta::days(n)),
        _ => Err(bad()),
    }
}

#[derive(Debug, Clone)]
struct VacuumOptions {
    older_than: TimeDelta,
    orphans_older_than: TimeDelta,
}

impl TableFunctionImpl for VacuumFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let mut strings = Vec::new();
        for expr in args.exprs() {
            match expr {
                Expr::Literal(
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::Utf8View(Some(s))
                    | ScalarValue::LargeUtf8(Some(s)),
                    _,
                ) => strings.push(s.clone()),
                _ => {
                    return plan_err!(
                        "{VACUUM_FUNCTION_NAME}() takes strings: '<table or location>' \
                         [, 'older_than=<duration>'] [, 'orphans_older_than=<duration>']"
                    );
                }
            }
        }
        if strings.is_empty() {
            return plan_err!("{VACUUM_FUNCTION_NAME}() needs a table name or location");
        }
        let target = strings.remove(0);
        let mut options = VacuumOptions {
            older_than: TimeDelta::days(7),
            orphans_older_than: TimeDelta::days(7),
        };
        for option in strings {
            match option.split_once('=') {
                Some((k, v)) if k.trim() == "older_than" => {
                    options.older_than = parse_duration(k.trim(), v)?
                }
                Some((k, v)) if k.trim() == "orphans_older_than" => {
                    options.orphans_older_than = parse_duration(k.trim(), v)?
                }
                _ => {
                    return Err(Error::UnknownOption {
                        key: option,
                        hint: format!(
                            " for {VACUUM_FUNCTION_NAME}: use 'older_than=<duration>' or \
                             'orphans_older_than=<duration>'"
                        ),
                    }
                    .into());
                }
            }
        }
        Ok(Arc::new(VacuumTable { target, options }))
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("versions_removed", DataType::UInt64, false),
        Field::new("files_removed", DataType::UInt64, false),
        Field::new("orphans_removed", DataType::UInt64, false),
        Field::new("bytes_removed", DataType::UInt64, false),
    ]))
}

struct VacuumTable {
    target: String,
    options: VacuumOptions,
}

impl fmt::Debug for VacuumTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VacuumTable")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl TableProvider for VacuumTable {
    fn schema(&self) -> SchemaRef {
        schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let dataset = dataset_named(state, &self.target).await?;
        let options = self.options.clone();
        let description = format!(
            "lance_vacuum: uri={}, older_than={}, orphans_older_than={}",
            crate::location::redact_uri(dataset.uri()),
            options.older_than,
            options.orphans_older_than
        );
        let action = Arc::new(ActionExec::new(description, schema(), move || {
            let (dataset, options) = (Arc::clone(&dataset), options.clone());
            Box::pin(async move { vacuum(&dataset, &options).await })
        }));
        project(action, projection)
    }
}

async fn vacuum(dataset: &lance::Dataset, options: &VacuumOptions) -> DFResult<RecordBatch> {
    let err = |e| DataFusionError::from(Error::lance("vacuuming", dataset.uri(), e));
    let stats = dataset
        .cleanup_old_versions(options.older_than, Some(false), Some(false))
        .await
        .map_err(err)?;
    // Files referenced by any remaining version: data files and deletion files.
    let mut referenced: HashSet<String> = HashSet::new();
    for version in dataset.versions().await.map_err(err)? {
        let at = dataset
            .checkout_version(version.version)
            .await
            .map_err(err)?;
        for fragment in at.fragments().iter() {
            referenced.extend(fragment.files.iter().map(|f| f.path.clone()));
            if let Some(file) = &fragment.deletion_file {
                let relative = relative_deletion_file_path(fragment.id, file);
                referenced.insert(relative.rsplit('/').next().unwrap_or("").to_string());
            }
        }
    }
    let store = dataset.object_store(None).await.map_err(err)?;
    // Never a file a statement of this process may still commit.
    let mut cutoff = Utc::now() - options.orphans_older_than;
    if let Some(started) = oldest_in_flight(dataset.uri()) {
        cutoff = cutoff.min(started - TimeDelta::seconds(1));
    }
    let (mut orphans, mut bytes) = (0u64, stats.bytes_removed);
    for dir in [dataset.data_dir(), dataset.deletions_dir()] {
        let candidates: Vec<_> = store
            .read_dir_all(&dir, Some(cutoff))
            .try_collect()
            .await
            .map_err(err)?;
        for meta in candidates {
            let name = meta.location.filename().unwrap_or_default().to_string();
            if referenced.contains(&name) {
                continue;
            }
            store.delete(&meta.location).await.map_err(err)?;
            orphans += 1;
            bytes += meta.size;
        }
    }
    let values = [
        stats.old_versions,
        stats.data_files_removed + stats.deletion_files_removed + stats.transaction_files_removed,
        orphans,
        bytes,
    ];
    Ok(RecordBatch::try_new(
        schema(),
        values
            .into_iter()
            .map(|v| Arc::new(UInt64Array::from(vec![v])) as ArrayRef)
            .collect(),
    )?)
}
