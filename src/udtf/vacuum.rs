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

use std::sync::Arc;

use chrono::TimeDelta;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::string_args;
use crate::error::{Error, fail};
use crate::physical_plan::VacuumOptions;
use crate::table::maintain::Maintain;

/// SQL name of the vacuum function.
pub const VACUUM_FUNCTION_NAME: &str = "lance_vacuum";

/// `lance_vacuum(...)`.
#[derive(Debug, Default)]
pub struct VacuumFunction {}

/// Parses `30s`, `10m`, `2h`, `7d`. A duration reaching back before 1970
/// is the time since then: no version or file is older, and the moment
/// `now - duration` stays one a clock can hold.
pub(crate) fn parse_duration(key: &str, value: &str) -> Result<TimeDelta, Error> {
    let value = value.trim();
    let bad = || Error::invalid_option(key, value, "expected a duration like 30s, 10m, 2h or 7d");
    let split = value.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = value.split_at(split);
    let n: i64 = number.trim().parse().map_err(|_| bad())?;
    if n < 0 {
        return Err(bad());
    }
    let seconds = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => return Err(bad()),
    };
    let since_epoch = chrono::Utc::now().timestamp();
    Ok(TimeDelta::seconds(
        seconds.map_or(since_epoch, |s| s.min(since_epoch)),
    ))
}

impl TableFunctionImpl for VacuumFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let Some(mut strings) = string_args(args.exprs()) else {
            return fail!(
                invalid_input,
                "{VACUUM_FUNCTION_NAME}() takes strings: '<table or location>' \
                     [, 'older_than=<duration>'] [, 'orphans_older_than=<duration>']"
            );
        };
        if strings.is_empty() {
            return fail!(
                invalid_input,
                "{VACUUM_FUNCTION_NAME}() needs a table name or location"
            );
        }
        let target = strings.remove(0);
        let mut options = VacuumOptions::default();
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
        Ok(Maintain::provider(target, options))
    }
}
