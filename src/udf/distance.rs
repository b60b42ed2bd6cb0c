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

use std::ops::Range;

use crate::error::fail;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float32Array, Float64Array, Float64Builder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::ScalarValue;
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

impl ScalarUDFImpl for L2DistanceFunction {
    fn name(&self) -> &str {
        L2_DISTANCE_FUNCTION_NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DFResult<Vec<DataType>> {
        let [a, b] = arg_types else {
            return fail!(
                invalid_input,
                "{L2_DISTANCE_FUNCTION_NAME} takes two vectors; got {} arguments",
                arg_types.len()
            );
        };
        for t in [a, b] {
            match element(t) {
                Some(e) if e.is_numeric() || e.is_null() => {}
                _ => {
                    return fail!(
                        invalid_input,
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
        let [a, b] = args.args.as_slice() else {
            return fail!(
                invalid_input,
                "{L2_DISTANCE_FUNCTION_NAME} takes two vectors"
            );
        };
        let (a, b) = (Vectors::of(a)?, Vectors::of(b)?);
        let rows = if all_scalars { 1 } else { rows };
        let mut out = Float64Builder::with_capacity(rows);
        for row in 0..rows {
            let (Some(x), Some(y)) = (a.row(row), b.row(row)) else {
                out.append_null();
                continue;
            };
            if x.len() != y.len() {
                return fail!(
                    invalid_input,
                    "{L2_DISTANCE_FUNCTION_NAME} requires both list inputs to have the same \
                     length, got {} and {}",
                    x.len(),
                    y.len()
                );
            }
            match (a.values.has_null(&x), b.values.has_null(&y)) {
                (false, false) => out.append_value(squared_distance(&a.values, x, &b.values, y)),
                _ => out.append_null(),
            }
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

/// The vectors of one argument, read in place: each row's elements are a
/// range of one values array (a scalar's one vector serves every row).
struct Vectors {
    list: ArrayRef,
    values: Values,
    scalar: bool,
}

/// A vector argument's elements, as stored (`f32`, `f64`) or as `f64`.
enum Values {
    F32(Float32Array),
    F64(Float64Array),
}

impl Values {
    fn has_null(&self, range: &Range<usize>) -> bool {
        let nulls = match self {
            Values::F32(v) => v.nulls(),
            Values::F64(v) => v.nulls(),
        };
        nulls.is_some_and(|n| range.clone().any(|i| n.is_null(i)))
    }
}

impl Vectors {
    fn of(arg: &ColumnarValue) -> DFResult<Self> {
        let (list, scalar) = match arg {
            ColumnarValue::Array(a) => (Arc::clone(a), false),
            ColumnarValue::Scalar(s) => (s.to_array()?, true),
        };
        let values = match list.data_type() {
            DataType::FixedSizeList(..) => Arc::clone(list.as_fixed_size_list().values()),
            DataType::List(_) => Arc::clone(list.as_list::<i32>().values()),
            DataType::LargeList(_) => Arc::clone(list.as_list::<i64>().values()),
            other => {
                return fail!(
                    invalid_input,
                    "{L2_DISTANCE_FUNCTION_NAME} takes two vectors; got {other}"
                );
            }
        };
        let values = match values.data_type() {
            DataType::Float32 => Values::F32(values.as_primitive::<Float32Type>().clone()),
            DataType::Float64 => Values::F64(values.as_primitive::<Float64Type>().clone()),
            _ => Values::F64(
                cast(&values, &DataType::Float64)?
                    .as_primitive::<Float64Type>()
                    .clone(),
            ),
        };
        Ok(Self {
            list,
            values,
            scalar,
        })
    }

    /// The element range of `row`'s vector; `None` when it is NULL.
    fn row(&self, row: usize) -> Option<Range<usize>> {
        let row = if self.scalar { 0 } else { row };
        if self.list.is_null(row) {
            return None;
        }
        Some(match self.list.data_type() {
            DataType::FixedSizeList(..) => {
                let list = self.list.as_fixed_size_list();
                let start = list.value_offset(row) as usize;
                start..start + list.value_length() as usize
            }
            DataType::List(_) => {
                let offsets = self.list.as_list::<i32>().value_offsets();
                offsets[row] as usize..offsets[row + 1] as usize
            }
            _ => {
                let offsets = self.list.as_list::<i64>().value_offsets();
                offsets[row] as usize..offsets[row + 1] as usize
            }
        })
    }
}

/// Σ (xᵢ − yᵢ)² in f64 over two equally long ranges.
fn squared_distance(a: &Values, x: Range<usize>, b: &Values, y: Range<usize>) -> f64 {
    match (a, b) {
        (Values::F32(a), Values::F32(b)) => sum_squares(&a.values()[x], &b.values()[y]),
        (Values::F32(a), Values::F64(b)) => sum_squares(&a.values()[x], &b.values()[y]),
        (Values::F64(a), Values::F32(b)) => sum_squares(&a.values()[x], &b.values()[y]),
        (Values::F64(a), Values::F64(b)) => sum_squares(&a.values()[x], &b.values()[y]),
    }
}

/// Σ (xᵢ − yᵢ)², each term in f64, summed in eight lanes (so the compiler
/// vectorises it) and then across them.
fn sum_squares<P: Copy + Into<f64>, Q: Copy + Into<f64>>(x: &[P], y: &[Q]) -> f64 {
    const LANES: usize = 8;
    let mut lanes = [0.0_f64; LANES];
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let (x_rest, y_rest) = (xs.remainder(), ys.remainder());
    for (p, q) in xs.zip(ys) {
        for i in 0..LANES {
            let d = p[i].into() - q[i].into();
            lanes[i] += d * d;
        }
    }
    let mut sum: f64 = lanes.iter().sum();
    for (p, q) in x_rest.iter().zip(y_rest) {
        let d = (*p).into() - (*q).into();
        sum += d * d;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{FixedSizeListArray, ListArray};
    use datafusion::arrow::datatypes::{Field, Float32Type as F32};
    use datafusion::config::ConfigOptions;

    fn l2(a: ColumnarValue, b: ColumnarValue, rows: usize) -> Vec<Option<f64>> {
        let field = |v: &ColumnarValue| Arc::new(Field::new("v", v.data_type(), true));
        let args = ScalarFunctionArgs {
            arg_fields: vec![field(&a), field(&b)],
            args: vec![a, b],
            number_rows: rows,
            return_field: Arc::new(Field::new("d", DataType::Float64, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        let out = L2DistanceFunction::default()
            .invoke_with_args(args)
            .unwrap()
            .to_array(rows)
            .unwrap();
        out.as_primitive::<Float64Type>().iter().collect()
    }

    fn naive(x: &[f32], y: &[f64]) -> f64 {
        x.iter()
            .zip(y)
            .map(|(p, q)| (f64::from(*p) - q) * (f64::from(*p) - q))
            .sum()
    }

    #[test]
    fn vectors_are_read_in_place_with_offsets_nulls_and_odd_dimensions() {
        const DIM: usize = 13;
        let rows: Vec<Option<Vec<Option<f32>>>> = (0..6)
            .map(|r| match r {
                2 => None,
                4 => Some((0..DIM).map(|i| (i != 5).then_some(1.0)).collect()),
                _ => Some((0..DIM).map(|i| Some((r * DIM + i) as f32 / 7.0)).collect()),
            })
            .collect();
        let column = FixedSizeListArray::from_iter_primitive::<F32, _, _>(rows.clone(), DIM as i32);
        // A slice: the rows start at an offset into the values.
        let column = column.slice(1, 5);
        let q: Vec<f64> = (0..DIM).map(|i| i as f64 * 0.3 - 1.0).collect();
        let query = ScalarValue::List(Arc::new(
            ListArray::from_iter_primitive::<Float64Type, _, _>([Some(
                q.iter().copied().map(Some),
            )]),
        ));
        let got = l2(
            ColumnarValue::Array(Arc::new(column)),
            ColumnarValue::Scalar(query),
            5,
        );
        let expected: Vec<Option<f64>> = rows[1..]
            .iter()
            .map(|r| {
                let r = r.as_ref()?;
                let r: Option<Vec<f32>> = r.iter().copied().collect();
                Some(naive(&r?, &q))
            })
            .collect();
        assert_eq!(got.len(), 5);
        for (g, e) in got.iter().zip(&expected) {
            match (g, e) {
                (Some(g), Some(e)) => assert!((g - e).abs() <= 1e-12 * e.max(1.0), "{g} vs {e}"),
                _ => assert_eq!(g, e),
            }
        }
        assert_eq!(got[1], None, "a NULL vector");
        assert_eq!(got[3], None, "a vector holding a NULL");
    }
}
