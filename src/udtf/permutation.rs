//! Permutation plans in SQL:
//!
//! * `lance_build_permutation('<base>', '<plan location or new table of a
//!   Lance directory catalog>' [, '<key>=<value>' ...])` builds a plan of the base at the version the statement reads and
//!   returns one row per split: `split_id, split_name, rows, plan_version,
//!   identity`. Options: `split=random|hash|sequential|calculated` (default:
//!   one split of every row); `ratios=0.8,0.2` | `counts=800,200` |
//!   `fixed=N` (random and sequential; `sizes=` is `counts=`); `seed=N`,
//!   `clump=N`; `columns=a,b`, `weights=80,20`, `discard=N` (hash);
//!   `expr=<Lance SQL giving 0..n-1>` (calculated); `names=train,test`;
//!   `shuffle=true`; `filter=<Lance SQL>`.
//! * `lance_permutation('<plan>', '<split name>' | <split number>
//!   [, 'offset=N', 'limit=N', 'identity=…', 'plan_version=N', 'base=…',
//!   'partitions=N'])` returns the base's rows of that split in plan order.
//!
//! Both plan nothing but nodes: `EXPLAIN` writes nothing. Reading validates
//! the plan while the statement is planned (see
//! [`crate::physical_plan::PlanSummary`]).

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::Expr;

use super::permutation_options::{build_options, read_options, selector};
use super::{string, string_args};
use crate::error::{Error, fail};
use crate::physical_plan::PlanSummary;
use crate::session::LanceSessionCache;
use crate::session::blocking::wait_for;
use crate::table::permutation::{BuildPermutation, ReadPermutation, named_location};

/// SQL name of the plan builder.
pub const BUILD_PERMUTATION_FUNCTION_NAME: &str = "lance_build_permutation";
/// SQL name of the plan reader.
pub const PERMUTATION_FUNCTION_NAME: &str = "lance_permutation";

/// `lance_build_permutation(...)`.
#[derive(Debug, Default)]
pub struct BuildPermutationFunction {}

impl TableFunctionImpl for BuildPermutationFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let f = BUILD_PERMUTATION_FUNCTION_NAME;
        let usage = format!(
            "{f}() takes strings: '<base table or location>', '<plan location or new catalog table>' [, '<key>=<value>' ...]"
        );
        let Some(mut strings) = string_args(args.exprs()) else {
            return fail!(invalid_input, "{usage}");
        };
        if strings.len() < 2 {
            return fail!(invalid_input, "{usage}");
        }
        let base = strings.remove(0);
        let plan = strings.remove(0);
        let options = build_options(f, &strings).map_err(|e| e.prefixed(f))?;
        Ok(BuildPermutation::provider(base, plan, options))
    }
}

/// `lance_permutation(...)`.
#[derive(Debug, Default)]
pub struct PermutationFunction {}

impl TableFunctionImpl for PermutationFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let f = PERMUTATION_FUNCTION_NAME;
        let usage = format!(
            "{f}() takes '<plan table or location>', a split name or number [, '<key>=<value>' \
             ...]"
        );
        let exprs = args.exprs();
        let (Some(plan), Some(Expr::Literal(split, _))) =
            (exprs.first().and_then(string), exprs.get(1))
        else {
            return fail!(invalid_input, "{usage}");
        };
        let Some(split) = selector(split) else {
            return fail!(invalid_input, "{usage}");
        };
        let Some(rest) = string_args(&exprs[2..]) else {
            return fail!(invalid_input, "{usage}");
        };
        let options = read_options(f, &rest)?;
        let session = args.session();
        let plan_location = named_location(session, plan)?;
        let base = options
            .base
            .as_deref()
            .map(|b| named_location(session, b))
            .transpose()?;
        let cache = LanceSessionCache::for_config(session.config());
        let version = options.plan_version;
        let summary = wait_for(async move {
            PlanSummary::load(&cache, &plan_location, version, base.as_ref()).await
        })?;
        if let Some(expected) = &options.identity {
            let actual = summary.identity();
            if *expected != actual {
                return Err(Error::invalid_input(format!(
                    "{f}: permutation plan '{}' is not the plan expected: its identity is \
                     '{actual}', the read expected '{expected}' (a checkpoint of another plan, \
                     or of another version of it?)",
                    summary.plan.display_uri
                ))
                .into());
            }
        }
        let number = summary.split(&split)?;
        let rows = summary.split_rows[number];
        let start = options.offset.min(rows);
        let end = options
            .limit
            .map_or(rows, |l| start.saturating_add(l).min(rows));
        Ok(ReadPermutation::provider(
            summary,
            number,
            start..end,
            options.partitions,
        ))
    }
}
