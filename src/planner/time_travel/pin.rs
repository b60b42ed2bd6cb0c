//! Resolving one time-travel reference: the table it names (a Lance table,
//! a dataset location, or a `db://` table) at the version it asks for.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::common::{ScalarValue, TableReference, plan_datafusion_err};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::sql::planner::object_name_to_table_reference;

use super::{AS_OF_FUNCTION_NAME, Kind, Reference, Target, evaluate};
use crate::cloud::CloudClient;
use crate::config::{LanceTableOptions, VersionSpec};
use crate::error::Error;
use crate::table::LanceTableProvider;
use crate::table::lookup::{self, registered_target, table_or_location};

/// A table pinned to one version.
#[derive(Debug)]
pub(super) struct Pinned {
    pub(super) table: Arc<dyn TableProvider>,
    pub(super) version: u64,
}

/// What a reference asks for.
enum Asked {
    Version(u64),
    Tag(String),
    /// The latest version committed at or before this time (µs since the
    /// epoch), shown as the second value in messages.
    Time(i64, String),
}

/// The table `reference` names, pinned to the version it asks for, and the
/// name its columns are qualified with.
pub(super) async fn pin(
    state: &SessionState,
    reference: &Reference,
) -> DFResult<(TableReference, Pinned)> {
    let (name, table) = match &reference.target {
        Target::Table(object_name) => {
            let normalize = state.config_options().sql_parser.enable_ident_normalization;
            let name = object_name_to_table_reference(object_name.clone(), normalize)?;
            let Some(table) = registered_target(state, &name).await? else {
                return Err(Error::not_supported(format!(
                    "'{}' on table '{name}': '{name}' is not a registered Lance table, and only \
                     Lance tables can be read as of a version",
                    reference.clause
                ))
                .into());
            };
            (name, table)
        }
        Target::Named(target) => {
            let target = match evaluate(state, target, &reference.clause).await? {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::Utf8View(Some(s))
                | ScalarValue::LargeUtf8(Some(s)) => s,
                other => {
                    return Err(plan_datafusion_err!(
                        "{}: the first argument must be a table name or a dataset location \
                         (a string); got {}",
                        reference.clause,
                        other.data_type()
                    ));
                }
            };
            (
                TableReference::bare(AS_OF_FUNCTION_NAME),
                table_named(state, &target).await?,
            )
        }
    };
    let table_name = match &table {
        lookup::Target::Lance(t) => t.name().to_string(),
        lookup::Target::Cloud(t) => t.name().to_string(),
    };
    let what = format!("'{}' on table '{table_name}'", reference.clause);
    let value = evaluate(state, &reference.value, &reference.clause).await?;
    let asked = asked(state, reference.kind, &value, &what)?;
    let pinned = match table {
        lookup::Target::Lance(table) => {
            let spec = match asked {
                Asked::Version(n) => VersionSpec::Version(n),
                Asked::Tag(tag) => VersionSpec::Tag(tag),
                Asked::Time(micros, shown) => VersionSpec::Version(
                    lance_version_at(state, &table, micros, &shown, &what).await?,
                ),
            };
            let pinned = table
                .at_version(spec, state)
                .await
                .map_err(|e| plan_datafusion_err!("{what}: {e}"))?;
            Pinned {
                version: pinned.pinned_version().unwrap_or_default(),
                table: Arc::new(pinned),
            }
        }
        lookup::Target::Cloud(table) => {
            let client = CloudClient::connect(&table.parts().table)?;
            let failed = |e: Error| plan_datafusion_err!("{what}: {e}");
            let version = match asked {
                Asked::Version(n) => n,
                Asked::Tag(tag) => client.tag_version(&tag).await.map_err(failed)?,
                Asked::Time(micros, shown) => {
                    let versions = client.versions().await.map_err(failed)?;
                    let at = |millis: i64| millis.saturating_mul(1000);
                    version_at(
                        versions.iter().filter_map(|(v, t)| t.map(|t| (*v, at(t)))),
                        micros,
                        &shown,
                        &what,
                    )?
                }
            };
            let pinned = table
                .at_version(version)
                .await
                .map_err(|e| plan_datafusion_err!("{what}: {e}"))?;
            Pinned {
                version,
                table: Arc::new(pinned),
            }
        }
    };
    Ok((name, pinned))
}

fn asked(state: &SessionState, kind: Kind, value: &ScalarValue, what: &str) -> DFResult<Asked> {
    let either = matches!(kind, Kind::Either);
    Ok(match value {
        _ if matches!(kind, Kind::Timestamp) => time(state, value, what)?,
        v if v.data_type().is_integer() => match v.cast_to(&DataType::Int64) {
            Ok(ScalarValue::Int64(Some(n))) if n > 0 => Asked::Version(n as u64),
            _ => {
                return Err(plan_datafusion_err!(
                    "{what}: versions are numbered from 1; got {v}"
                ));
            }
        },
        ScalarValue::Utf8(Some(tag))
        | ScalarValue::Utf8View(Some(tag))
        | ScalarValue::LargeUtf8(Some(tag)) => Asked::Tag(tag.clone()),
        v if either && is_time(&v.data_type()) => time(state, v, what)?,
        v => {
            return Err(plan_datafusion_err!(
                "{what}: expected a version number{}; got {v} ({})",
                if either {
                    ", a tag name or a TIMESTAMP"
                } else {
                    " or a tag name"
                },
                v.data_type()
            ));
        }
    })
}

fn is_time(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

/// `at` in µs since the epoch (a time without a zone is in the session time
/// zone), and as shown in messages.
fn time(state: &SessionState, at: &ScalarValue, what: &str) -> DFResult<Asked> {
    let zone = state
        .config_options()
        .execution
        .time_zone
        .clone()
        .unwrap_or_else(|| "+00:00".to_string());
    let micros = match at.cast_to(&DataType::Timestamp(
        TimeUnit::Microsecond,
        Some(zone.as_str().into()),
    )) {
        Ok(ScalarValue::TimestampMicrosecond(Some(micros), _)) => micros,
        Ok(_) => return Err(plan_datafusion_err!("{what}: the time is NULL")),
        Err(e) => {
            return Err(plan_datafusion_err!("{what}: {at} is not a time ({e})"));
        }
    };
    let shown = ScalarValue::TimestampMicrosecond(Some(micros), Some(zone.into())).to_array()?;
    Ok(Asked::Time(micros, array_value_to_string(&shown, 0)?))
}

/// The Lance table `target` names: a registered Lance or `db://` table,
/// else a dataset location.
async fn table_named(state: &SessionState, target: &str) -> DFResult<lookup::Target> {
    if let Some(table) = registered_target(state, &TableReference::from(target)).await? {
        return Ok(table);
    }
    let location = table_or_location(state, target).await?;
    let table = LanceTableProvider::builder(location.uri.clone())
        .with_table_options(LanceTableOptions {
            storage_options: location.storage_options.clone(),
            ..Default::default()
        })
        .with_session_cache(crate::session::LanceSessionCache::for_config(
            state.config(),
        ))
        .build()
        .await?;
    Ok(lookup::Target::Lance(Arc::new(table)))
}

/// The latest version of a Lance table committed at or before `micros`.
async fn lance_version_at(
    state: &SessionState,
    table: &LanceTableProvider,
    micros: i64,
    shown: &str,
    what: &str,
) -> DFResult<u64> {
    let cache = table.session_cache(state);
    let latest = cache
        .open(table.uri(), table.store_params(), &VersionSpec::Latest)
        .await?;
    let versions = latest
        .versions()
        .await
        .map_err(|e| Error::lance("listing versions of", &table.location().display_uri, e))?;
    version_at(
        versions
            .iter()
            .map(|v| (v.version, v.timestamp.timestamp_micros())),
        micros,
        shown,
        what,
    )
}

/// Of `versions` (number, commit time in µs), the latest committed at or
/// before `micros`.
fn version_at(
    versions: impl Iterator<Item = (u64, i64)> + Clone,
    micros: i64,
    shown: &str,
    what: &str,
) -> DFResult<u64> {
    if let Some(found) = versions
        .clone()
        .filter(|(_, t)| *t <= micros)
        .map(|(v, _)| v)
        .max()
    {
        return Ok(found);
    }
    Err(match versions.min_by_key(|(v, _)| *v) {
        Some((earliest, at)) => {
            let at = chrono::DateTime::from_timestamp_micros(at)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
                .unwrap_or_else(|| at.to_string());
            plan_datafusion_err!(
                "{what}: no version was committed at or before {shown}; the earliest is \
                 version {earliest}, committed at {at}"
            )
        }
        None => plan_datafusion_err!("{what}: the table has no versions"),
    })
}
