//! `lance_permutation_identity('<plan location>' [, '<key>=<value>' ...])`:
//! the identity of a permutation plan (its latest version, or
//! `'plan_version=N'`; `'base=<location>'` for a plan that records no base)
//! — the string `lance_permutation(..., 'identity=…')` checks. The plan is
//! validated as a read validates it. Locations only: a scalar function
//! does not see the session's catalog.

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

use crate::error::Error;
use crate::location::{TableLocation, normalize_uri};
use crate::physical_plan::PlanSummary;
use crate::session::LanceSessionCache;
use crate::session::blocking::wait_for;

/// SQL name of the identity function.
pub const PERMUTATION_IDENTITY_FUNCTION_NAME: &str = "lance_permutation_identity";

/// `lance_permutation_identity(plan [, options])`. Volatile: a plan's
/// latest version may change between statements.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PermutationIdentityFunction {
    signature: Signature,
}

impl Default for PermutationIdentityFunction {
    fn default() -> Self {
        Self {
            signature: Signature::variadic_any(Volatility::Volatile),
        }
    }
}

/// The identity of the plan at `plan` with `options`.
fn identity(plan: &str, options: &[String]) -> crate::Result<String> {
    let f = PERMUTATION_IDENTITY_FUNCTION_NAME;
    let mut version = None;
    let mut base = None;
    for option in options {
        match option.split_once('=') {
            Some(("plan_version", v)) => {
                version = Some(crate::config::parse::<u64>("plan_version", v, "a version")?)
            }
            Some(("base", b)) => {
                base = Some(TableLocation::new(normalize_uri(b)?, Default::default()))
            }
            _ => {
                return Err(Error::UnknownOption {
                    key: option.clone(),
                    hint: format!(" for {f}: its options are plan_version, base"),
                });
            }
        }
    }
    let location = TableLocation::new(normalize_uri(plan)?, Default::default());
    let cache = LanceSessionCache::shared();
    let summary =
        wait_for(
            async move { PlanSummary::load(&cache, &location, version, base.as_ref()).await },
        )?;
    Ok(summary.identity())
}

impl ScalarUDFImpl for PermutationIdentityFunction {
    fn name(&self) -> &str {
        PERMUTATION_IDENTITY_FUNCTION_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DFResult<DataType> {
        if arg_types.is_empty()
            || !arg_types
                .iter()
                .all(|t| matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8))
        {
            return Err(Error::invalid_input(format!(
                "{PERMUTATION_IDENTITY_FUNCTION_NAME}() takes strings: '<plan location>' [, \
                 'plan_version=N', 'base=<location>']"
            ))
            .into());
        }
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let strings: Vec<_> = arrays
            .iter()
            .map(|a| cast(a, &DataType::Utf8))
            .collect::<Result<_, _>>()?;
        let value = |row: usize| -> DFResult<Option<String>> {
            let mut texts = Vec::with_capacity(strings.len());
            for s in &strings {
                let s = s.as_string::<i32>();
                if s.is_null(row) {
                    return Ok(None);
                }
                texts.push(s.value(row).to_string());
            }
            Ok(Some(identity(&texts[0], &texts[1..])?))
        };
        if scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::Utf8(value(0)?)));
        }
        let mut out = StringBuilder::new();
        for row in 0..rows {
            out.append_option(value(row)?);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}
