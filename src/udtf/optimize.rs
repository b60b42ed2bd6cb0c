//! `lance_optimize('<table or location>' [, '<option>=<value>' ...])`:
//! compacts small fragments (dropping deleted rows) and brings indices up to
//! date. Options: `target_rows_per_fragment=<n>` (Lance's default
//! 1,048,576), `materialize_deletions=true|false`,
//! `materialize_deletions_threshold=<0..1>` (default 0.1), `indices=true|false`.
//! The work happens when the statement runs (`EXPLAIN` changes nothing); two
//! versions for the compaction when there is anything to compact (Lance 14
//! reserves fragment ids, then rewrites), one more for the indices when the
//! table has any (Lance commits them apart). The
//! result is one row: `fragments_removed, fragments_added, files_removed,
//! files_added, indices_optimized, version`.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::string_args;
use crate::config::{parse, parse_bool, positive};
use crate::error::{Error, fail};
use crate::physical_plan::OptimizeOptions;
use crate::table::maintain::Maintain;

/// SQL name of the optimisation function.
pub const OPTIMIZE_FUNCTION_NAME: &str = "lance_optimize";

/// `lance_optimize(...)`.
#[derive(Debug, Default)]
pub struct OptimizeFunction {}

/// Reads `key=value` options over the defaults.
fn options(pairs: &[String]) -> Result<OptimizeOptions, Error> {
    let mut options = OptimizeOptions::default();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(unknown(pair));
        };
        match key.trim() {
            "target_rows_per_fragment" => {
                options.target_rows_per_fragment = positive(key.trim(), value)?
            }
            "materialize_deletions" => {
                options.materialize_deletions = parse_bool(key.trim(), value)?
            }
            "materialize_deletions_threshold" => {
                let share: f64 = parse(key.trim(), value, "a share between 0 and 1")?;
                if !(0.0..=1.0).contains(&share) {
                    return Err(Error::invalid_option(
                        key.trim(),
                        value,
                        "must be between 0 and 1",
                    ));
                }
                options.materialize_deletions_threshold = share;
            }
            "indices" => options.indices = parse_bool(key.trim(), value)?,
            _ => return Err(unknown(pair)),
        }
    }
    Ok(options)
}

fn unknown(pair: &str) -> Error {
    Error::UnknownOption {
        key: pair.to_string(),
        hint: format!(
            " for {OPTIMIZE_FUNCTION_NAME}: use 'target_rows_per_fragment=<n>', \
             'materialize_deletions=true|false', 'materialize_deletions_threshold=<0..1>' or \
             'indices=true|false'"
        ),
    }
}

impl TableFunctionImpl for OptimizeFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let Some(mut strings) = string_args(args.exprs()) else {
            return fail!(
                invalid_input,
                "{OPTIMIZE_FUNCTION_NAME}() takes strings: '<table or location>' \
                     [, '<option>=<value>' ...]"
            );
        };
        if strings.is_empty() {
            return fail!(
                invalid_input,
                "{OPTIMIZE_FUNCTION_NAME}() needs a table name or location"
            );
        }
        let target = strings.remove(0);
        Ok(Maintain::provider(target, options(&strings)?))
    }
}
