//! `l2_distance(a, b)`: Σ (aᵢ − bᵢ)², the *squared* Euclidean distance —
//! Lance's `l2` metric, the `_distance` its vector search returns — usable
//! anywhere in SQL. DataFusion provides the other metrics under their usual
//! names: `cosine_distance` (Lance's `cosine`), `inner_product` /
//! `dot_product` (Lance's `dot` distance is `1 - dot_product`) and
//! `array_distance` (the Euclidean distance, `sqrt(l2_distance)`).
//!
//! Arguments are vectors: `FixedSizeList`, `List` or `LargeList` of numbers
//! (a `FLOAT[n]` column, an array literal such as `[1.0, 2.0]`), computed in
//! f64 and returned as `Float64` — like DataFusion's distance functions: NULL
//! when a vector is NULL or holds a NULL, an error naming the function when
//! the lengths differ.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Float64Builder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type};
use datafusion::common::{ScalarValue, exec_err, plan_err};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// SQL name of the squared Euclidean distance.
pub const L2_DISTANCE_FUNCTION_NAME: &str = "l2_distance";

/// `l2_distance(a, b)` (see the module docs).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct L2DistanceFunction {
    signature: Signature,
}

impl Default for L2DistanceFunction {
    fn default() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// The element type of a vector type, if it is one.
fn element(data_type: &DataType) -> Option<&DataType> {
    match data_type {
        DataType::FixedSizeList(f, _) | DataType::List(f) | DataType::LargeList(f) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// Vectors as the function computes on them.
fn vector_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
}

impl ScalarUDFImpl for L2DistanceFunction {
    fn name(&self) -> &str {
        L2_DISTANCE_FUNCTION_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DFResult<Vec<DataType>> {
        let [a, b] = arg_types else {
            return plan_err!(
                "{L2_DISTANCE_FUNCTION_NAME} takes two vectors; got {} arguments",
                arg_types.len()
            );
        };
        for t in [a, b] {
            match element(t) {
                Some(e) if e.is_numeric() || e.is_null() => {}
                _ => {
                    return plan_err!(
                        "{L2_DISTANCE_FUNCTION_NAME} takes two vectors (FLOAT[n] columns or \
                         arrays of numbers); got {t}"
                    );
                }
            }
        }
        Ok(vec![a.clone(), b.clone()])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DFResult<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let rows = args.number_rows;
        let all_scalars = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let vectors = args
            .args
            .iter()
            .map(|a| Ok(cast(&a.to_array(rows)?, &vector_type())?))
            .collect::<DFResult<Vec<ArrayRef>>>()?;
        let (a, b) = (vectors[0].as_list::<i32>(), vectors[1].as_list::<i32>());
        let mut out = Float64Builder::with_capacity(rows);
        for row in 0..rows {
            if a.is_null(row) || b.is_null(row) {
                out.append_null();
                continue;
            }
            let (x, y) = (a.value(row), b.value(row));
            let (x, y) = (
                x.as_primitive::<Float64Type>(),
                y.as_primitive::<Float64Type>(),
            );
            if x.len() != y.len() {
                return exec_err!(
                    "{L2_DISTANCE_FUNCTION_NAME} requires both list inputs to have the same \
                     length, got {} and {}",
                    x.len(),
                    y.len()
                );
            }
            if x.null_count() > 0 || y.null_count() > 0 {
                out.append_null();
                continue;
            }
            let squared = x
                .values()
                .iter()
                .zip(y.values())
                .map(|(p, q)| (p - q) * (p - q))
                .sum();
            out.append_value(squared);
        }
        let result: Float64Array = out.finish();
        if all_scalars {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &result, 0,
            )?));
        }
        Ok(ColumnarValue::Array(Arc::new(result)))
    }
}
