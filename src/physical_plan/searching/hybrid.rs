//! Hybrid search for [`crate::physical_plan::LanceSearchExec`]: a vector search and a
//! full-text search of one version, fused by reciprocal rank.
//!
//! Each search returns its best `k` rows (the projected columns, its own
//! score and `_rowid`). A row's relevance is the sum, over the searches that
//! found it, of `1 / (rrf_k + rank)`, rank counted from 1 (nearest first,
//! best BM25 first; equal scores by row id). The `k` most relevant rows are
//! kept, most relevant first (equal relevance by row id), with `_distance`
//! NULL for a row only the text search found and `_score` NULL for one only
//! the vector search found.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float32Array, Float64Array, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::compute::{concat_batches, interleave};
use datafusion::arrow::datatypes::{Float32Type, Schema, SchemaRef, UInt64Type};
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;

use crate::physical_plan::search::{DISTANCE_COLUMN, SCORE_COLUMN, TextQuery, VectorQuery};

/// The name of the fused relevance column a hybrid search adds.
pub const RELEVANCE_COLUMN: &str = "_relevance";

/// The reciprocal-rank constant by default (Cormack et al., LanceDB's
/// `RRFReranker`).
pub const DEFAULT_RRF_K: u32 = 60;

/// One hybrid query: both searches return `vector.k` rows at most.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridQuery {
    /// The nearest-neighbour half (`k` is the result size).
    pub vector: VectorQuery,
    /// The full-text half (its `limit` is `k`).
    pub text: TextQuery,
    /// The constant in `1 / (rrf_k + rank)`.
    pub rrf_k: u32,
}

/// One search's rows: the projected columns, then its score, then `_rowid`.
pub(super) struct Ranked {
    batch: RecordBatch,
    /// Row indices of `batch`, best first.
    order: Vec<usize>,
}

impl Ranked {
    /// `batches` of a search whose score is `score` (`_distance`: smaller is
    /// better; `_score`: larger is better).
    pub(super) fn new(batches: &[RecordBatch], schema: &SchemaRef, score: &str) -> DFResult<Self> {
        let batch = concat_batches(schema, batches)?;
        let (Some(values), Some(ids)) = (
            batch.column_by_name(score).map(Arc::clone),
            batch.column_by_name("_rowid").map(Arc::clone),
        ) else {
            return internal_err!("a search returned no '{score}' or '_rowid' column");
        };
        let values = values.as_primitive::<Float32Type>();
        let ids = ids.as_primitive::<UInt64Type>();
        let ascending = score == DISTANCE_COLUMN;
        let mut order: Vec<usize> = (0..batch.num_rows()).collect();
        // NULL scores last, then by score, then by row id.
        order.sort_by(|&a, &b| {
            let key = |i: usize| values.is_valid(i).then(|| values.value(i));
            let by_score = match (key(a), key(b)) {
                (Some(x), Some(y)) if ascending => x.total_cmp(&y),
                (Some(x), Some(y)) => y.total_cmp(&x),
                (x, y) => x.is_none().cmp(&y.is_none()),
            };
            by_score.then(ids.value(a).cmp(&ids.value(b)))
        });
        Ok(Self { batch, order })
    }

    fn row_id(&self, row: usize) -> u64 {
        self.batch
            .column_by_name("_rowid")
            .expect("checked in new")
            .as_primitive::<UInt64Type>()
            .value(row)
    }

    fn score(&self, name: &str) -> &Float32Array {
        self.batch
            .column_by_name(name)
            .expect("checked in new")
            .as_primitive::<Float32Type>()
    }
}

#[derive(Default)]
struct Candidate {
    vector_row: Option<usize>,
    text_row: Option<usize>,
    relevance: f64,
}

/// The `k` most relevant rows of `vector` and `text` (each with `columns`
/// projected columns first), as `schema` says: the columns, `_distance`,
/// `_score`, `_relevance`.
pub(super) fn fuse(
    vector: &Ranked,
    text: &Ranked,
    columns: usize,
    k: usize,
    rrf_k: u32,
    schema: &SchemaRef,
) -> DFResult<RecordBatch> {
    let mut candidates: HashMap<u64, Candidate> = HashMap::new();
    for (rank, &row) in vector.order.iter().enumerate() {
        let entry = candidates.entry(vector.row_id(row)).or_default();
        entry.vector_row = Some(row);
        entry.relevance += 1.0 / (f64::from(rrf_k) + rank as f64 + 1.0);
    }
    for (rank, &row) in text.order.iter().enumerate() {
        let entry = candidates.entry(text.row_id(row)).or_default();
        entry.text_row = Some(row);
        entry.relevance += 1.0 / (f64::from(rrf_k) + rank as f64 + 1.0);
    }
    let mut ranked: Vec<(u64, Candidate)> = candidates.into_iter().collect();
    ranked.sort_by(|(a_id, a), (b_id, b)| b.relevance.total_cmp(&a.relevance).then(a_id.cmp(b_id)));
    ranked.truncate(k);
    // Where each row's columns come from: (0, row) the vector search's,
    // (1, row) the text search's.
    let sources: Vec<(usize, usize)> = ranked
        .iter()
        .map(|(_, c)| match (c.vector_row, c.text_row) {
            (Some(row), _) => (0, row),
            (None, Some(row)) => (1, row),
            (None, None) => unreachable!("every candidate was found by a search"),
        })
        .collect();
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns + 3);
    for i in 0..columns {
        let from = [
            vector.batch.column(i).as_ref(),
            text.batch.column(i).as_ref(),
        ];
        arrays.push(interleave(&from, &sources)?);
    }
    let (distances, scores) = (vector.score(DISTANCE_COLUMN), text.score(SCORE_COLUMN));
    arrays.push(Arc::new(
        ranked
            .iter()
            .map(|(_, c)| {
                c.vector_row
                    .and_then(|r| distances.is_valid(r).then(|| distances.value(r)))
            })
            .collect::<Float32Array>(),
    ));
    arrays.push(Arc::new(
        ranked
            .iter()
            .map(|(_, c)| {
                c.text_row
                    .and_then(|r| scores.is_valid(r).then(|| scores.value(r)))
            })
            .collect::<Float32Array>(),
    ));
    arrays.push(Arc::new(
        ranked
            .iter()
            .map(|(_, c)| Some(c.relevance))
            .collect::<Float64Array>(),
    ));
    let options = RecordBatchOptions::new().with_row_count(Some(ranked.len()));
    let fields: Vec<_> = vector.batch.schema().fields()[..columns]
        .iter()
        .cloned()
        .chain(schema.fields()[schema.fields().len() - 3..].iter().cloned())
        .collect();
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        arrays,
        &options,
    )?)
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, UInt64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};

    use super::*;
    use crate::physical_plan::search::{distance_field, relevance_field, score_field};

    fn half(ids: &[i64], scores: &[Option<f32>], row_ids: &[u64], score: Field) -> Ranked {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            score.clone(),
            Field::new("_rowid", DataType::UInt64, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(Float32Array::from(scores.to_vec())),
                Arc::new(UInt64Array::from(row_ids.to_vec())),
            ],
        )
        .unwrap();
        Ranked::new(&[batch], &schema, score.name()).unwrap()
    }

    #[test]
    fn ranks_by_score_then_row_id_and_sums_reciprocal_ranks() {
        // Vector: row 30 nearest, rows 20 and 10 tie (row id decides), a NULL
        // distance last. Text: row 20 best, then row 40.
        let vector = half(
            &[3, 2, 1, 5],
            &[Some(0.1), Some(0.5), Some(0.5), None],
            &[30, 20, 10, 50],
            distance_field(),
        );
        let text = half(&[4, 2], &[Some(1.0), Some(2.0)], &[40, 20], score_field());
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            distance_field(),
            score_field(),
            relevance_field(),
        ]));
        let out = fuse(&vector, &text, 1, 4, 10, &schema).unwrap();
        let ids = out.column(0).as_primitive::<Int64Type>();
        // Row 20 (id 2): vector rank 3 + text rank 1; row 30 (id 3): vector
        // rank 1; rows 10 (id 1, vector rank 2) and 40 (id 4, text rank 2)
        // tie at 1/12: row id 10 first; row 50 (NULL distance, rank 4) is cut.
        assert_eq!(ids.values().to_vec(), vec![2, 3, 1, 4]);
        let relevance = out.column(3).as_primitive::<Float64Type>();
        let expected = [1.0 / 13.0 + 1.0 / 11.0, 1.0 / 11.0, 1.0 / 12.0, 1.0 / 12.0];
        for (i, want) in expected.iter().enumerate() {
            assert!((relevance.value(i) - want).abs() < 1e-12, "row {i}");
        }
        let distance = out.column(1).as_primitive::<Float32Type>();
        let score = out.column(2).as_primitive::<Float32Type>();
        assert_eq!((distance.value(0), score.value(0)), (0.5, 2.0));
        assert!(score.is_null(1) && score.is_null(2) && distance.is_null(3));
        assert_eq!(score.value(3), 1.0);
    }
}
