//! Vector distance functions, usable anywhere in SQL, with Lance's metrics:
//!
//! | function | value | Lance metric |
//! |---|---|---|
//! | `l2_distance(a, b)` | Σ (aᵢ − bᵢ)² — the *squared* Euclidean distance | `l2` |
//! | `cosine_distance(a, b)` | 1 − a·b ⁄ (‖a‖ ‖b‖) (NaN when a vector is all zeros) | `cosine` |
//! | `dot_product(a, b)` | a·b (Lance's `dot` distance is 1 − a·b) | — |
//!
//! Arguments are vectors: `FixedSizeList`, `List` or `LargeList` of numbers
//! (a `FLOAT[n]` column, an array literal such as `[1.0, 2.0]`), computed in
//! f64 and returned as `Float64`. NULL in, NULL out; vectors of different
//! lengths, or with a NULL element, are errors naming the function.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Float64Builder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// Which distance a [`DistanceFunction`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Distance {
    /// `l2_distance`: squared Euclidean (Lance's `l2`).
    L2,
    /// `cosine_distance`: 1 − cosine similarity (Lance's `cosine`).
    Cosine,
    /// `dot_product`: the dot product.
    Dot,
}

impl Distance {
    /// Every distance function.
    pub const ALL: [Distance; 3] = [Self::L2, Self::Cosine, Self::Dot];

    /// The function's SQL name.
    pub fn function_name(self) -> &'static str {
        match self {
            Self::L2 => "l2_distance",
            Self::Cosine => "cosine_distance",
            Self::Dot => "dot_product",
        }
    }

    fn of(self, a: &[f64], b: &[f64]) -> f64 {
        let dot = || a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        match self {
            Self::L2 => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum(),
            Self::Cosine => {
                let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
                1.0 - dot() / (norm(a) * norm(b))
            }
            Self::Dot => dot(),
        }
    }
}

/// `l2_distance`, `cosine_distance` or `dot_product`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct DistanceFunction {
    distance: Distance,
    signature: Signature,
}

impl DistanceFunction {
    /// The function computing `distance`.
    pub fn new(distance: Distance) -> Self {
        Self {
            distance,
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

/// Vectors as the functions compute on them.
fn vector_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float64, true)))
}

impl ScalarUDFImpl for DistanceFunction {
    fn name(&self) -> &str {
        self.distance.function_name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DFResult<Vec<DataType>> {
        let name = self.name();
        let [a, b] = arg_types else {
            return plan_err!(
                "{name} takes two vectors; got {} arguments",
                arg_types.len()
            );
        };
        for t in [a, b] {
            match element(t) {
                Some(e) if e.is_numeric() || e.is_null() => {}
                _ => {
                    return plan_err!(
                        "{name} takes two vectors (FLOAT[n] columns or arrays of numbers); got {t}"
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
                    "{}: vectors of different lengths ({} and {} elements)",
                    self.name(),
                    x.len(),
                    y.len()
                );
            }
            if x.null_count() > 0 || y.null_count() > 0 {
                return exec_err!("{}: a vector has a NULL element", self.name());
            }
            out.append_value(self.distance.of(x.values(), y.values()));
        }
        let result: Float64Array = out.finish();
        if all_scalars {
            return Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::try_from_array(&result, 0)?,
            ));
        }
        Ok(ColumnarValue::Array(Arc::new(result)))
    }
}
