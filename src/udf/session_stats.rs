//! `lance_session_stats()`: the dataset opener's counters in the process
//! that evaluates it.
//!
//! `lance_cache_stats()` describes the session of the process that plans a
//! query. This function is evaluated row by row where the rows are, so on a
//! cluster `SELECT lance_session_stats() FROM t` answers from the executors
//! that scanned `t`: one struct per row with the executor's process id and
//! its counters (summed over the process-wide shared sessions).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StructArray, UInt32Array, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::ScalarValue;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::session::LanceSessionCache;

/// SQL name of the session statistics function.
pub const SESSION_STATS_FUNCTION_NAME: &str = "lance_session_stats";

/// `lance_session_stats()` → `{process_id, opens, reused, loads, joined}`:
/// the process evaluating it and its dataset opener's counters — dataset
/// opens requested, opens answered by the dataset already held, manifest
/// loads, and opens that waited for a concurrent load of the same version.
/// Volatile: never folded at planning time.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SessionStatsFunction {
    signature: Signature,
}

impl Default for SessionStatsFunction {
    fn default() -> Self {
        Self {
            signature: Signature::nullary(Volatility::Volatile),
        }
    }
}

fn fields() -> Fields {
    let counter = |name: &str| Field::new(name, DataType::UInt64, false);
    Fields::from(vec![
        Field::new("process_id", DataType::UInt32, false),
        counter("opens"),
        counter("reused"),
        counter("loads"),
        counter("joined"),
    ])
}

impl ScalarUDFImpl for SessionStatsFunction {
    fn name(&self) -> &str {
        SESSION_STATS_FUNCTION_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DFResult<DataType> {
        Ok(DataType::Struct(fields()))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let stats = LanceSessionCache::process_stats();
        let counter = |v: u64| Arc::new(UInt64Array::from(vec![v])) as ArrayRef;
        let columns = vec![
            Arc::new(UInt32Array::from(vec![std::process::id()])) as ArrayRef,
            counter(stats.opens),
            counter(stats.reused),
            counter(stats.loads),
            counter(stats.joined),
        ];
        let array = StructArray::try_new(fields(), columns, None)?;
        Ok(ColumnarValue::Scalar(ScalarValue::Struct(Arc::new(array))))
    }
}
