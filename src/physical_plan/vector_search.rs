//! [`LanceVectorSearchExec`]: the `k` rows of one table version nearest to a
//! query vector, found by Lance's `Scanner::nearest` — with the column's ANN
//! index when it has one (and `use_index` is on), exactly otherwise.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::Float32Array;
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use datafusion::common::internal_err;
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::TryStreamExt;
use lance_linalg::distance::DistanceType;

use super::scan::conform;
use crate::error::Error;
use crate::location::{Snapshot, TableLocation};
use crate::session::LanceSessionCache;

/// The name of the distance column a vector search adds.
pub const DISTANCE_COLUMN: &str = "_distance";

/// The `_distance` field.
pub(crate) fn distance_field() -> Field {
    Field::new(DISTANCE_COLUMN, DataType::Float32, true)
}

/// A distance metric Lance searches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Squared Euclidean distance (`l2_distance`).
    L2,
    /// `1 - cosine similarity` (`cosine_distance`).
    Cosine,
    /// `1 - dot product`.
    Dot,
}

impl Metric {
    /// The metric's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Self::L2 => "l2",
            Self::Cosine => "cosine",
            Self::Dot => "dot",
        }
    }

    /// The metric called `name` (`l2` / `euclidean`, `cosine`, `dot`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "l2" | "euclidean" => Some(Self::L2),
            "cosine" => Some(Self::Cosine),
            "dot" => Some(Self::Dot),
            _ => None,
        }
    }

    pub(crate) fn lance(self) -> DistanceType {
        match self {
            Self::L2 => DistanceType::L2,
            Self::Cosine => DistanceType::Cosine,
            Self::Dot => DistanceType::Dot,
        }
    }
}

/// One nearest-neighbour query.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorQuery {
    /// The vector column searched.
    pub column: String,
    /// The query vector.
    pub vector: Vec<f32>,
    /// How many rows.
    pub k: usize,
    /// The metric; the index's (or L2 without one) when `None`.
    pub metric: Option<Metric>,
    /// IVF partitions probed (Lance's adaptive default when `None`).
    pub nprobes: Option<usize>,
    /// Re-rank `k × refine_factor` candidates with exact distances.
    pub refine_factor: Option<u32>,
    /// HNSW search breadth.
    pub ef: Option<usize>,
    /// Filter before the search (`true`) or after it (`false`: fewer than
    /// `k` rows may remain).
    pub prefilter: bool,
    /// Use the column's ANN index when it has one.
    pub use_index: bool,
    /// The filter Lance applies before the search (with `prefilter`), with
    /// DataFusion's semantics (see [`crate::table`]'s pushdown rules).
    pub filter: Option<Expr>,
}

/// `lance_vector_search(...)` on one snapshot: emits the projected columns
/// and `_distance`, nearest first, from one partition.
#[derive(Debug)]
pub struct LanceVectorSearchExec {
    location: TableLocation,
    snapshot: Snapshot,
    columns: Vec<String>,
    query: VectorQuery,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl LanceVectorSearchExec {
    /// Searches version `snapshot` of the table at `location`, returning
    /// `columns` and `_distance` as `schema` says.
    pub fn new(
        location: TableLocation,
        snapshot: Snapshot,
        columns: Vec<String>,
        query: VectorQuery,
        schema: SchemaRef,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            location,
            snapshot,
            columns,
            query,
            schema,
            properties,
        }
    }

    /// Where the table lives.
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// The version searched.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The table columns returned (before `_distance`).
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The query.
    pub fn query(&self) -> &VectorQuery {
        &self.query
    }
}

impl DisplayAs for LanceVectorSearchExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = &self.query;
        write!(
            f,
            "LanceVectorSearchExec: uri={}, version={}, column={}, k={}, dim={}, projection=[{}]",
            self.location.display_uri,
            self.snapshot.version,
            q.column,
            q.k,
            q.vector.len(),
            self.columns.join(", ")
        )?;
        if let Some(m) = q.metric {
            write!(f, ", metric={}", m.name())?;
        }
        if let Some(n) = q.nprobes {
            write!(f, ", nprobes={n}")?;
        }
        if let Some(r) = q.refine_factor {
            write!(f, ", refine_factor={r}")?;
        }
        if let Some(ef) = q.ef {
            write!(f, ", ef={ef}")?;
        }
        if !q.use_index {
            write!(f, ", use_index=false")?;
        }
        if let Some(filter) = &q.filter {
            write!(f, ", prefilter={filter}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for LanceVectorSearchExec {
    fn name(&self) -> &str {
        "LanceVectorSearchExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("LanceVectorSearchExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("LanceVectorSearchExec has one partition, {partition} requested");
        }
        let (location, snapshot) = (self.location.clone(), self.snapshot.clone());
        let (columns, query) = (self.columns.clone(), self.query.clone());
        let schema = Arc::clone(&self.schema);
        let conform_to = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            let display = location.display_uri.clone();
            let lance_err = move |e| DataFusionError::from(Error::lance("searching", &display, e));
            let cache = LanceSessionCache::for_task(&context);
            let params = cache.params_for(&location);
            let dataset = cache
                .open_snapshot(&location.uri, &params, &snapshot)
                .await?;
            let mut scanner = dataset.scan();
            scanner.project(&columns).map_err(&lance_err)?;
            let vector = Float32Array::from(query.vector.clone());
            scanner
                .nearest(&query.column, &vector, query.k)
                .map_err(&lance_err)?;
            if let Some(metric) = query.metric {
                scanner.distance_metric(metric.lance());
            }
            if let Some(n) = query.nprobes {
                scanner.nprobes(n);
            }
            if let Some(r) = query.refine_factor {
                scanner.refine(r);
            }
            if let Some(ef) = query.ef {
                scanner.ef(ef);
            }
            scanner
                .prefilter(query.prefilter)
                .use_index(query.use_index);
            if let Some(filter) = &query.filter {
                scanner.filter_expr(filter.clone());
            }
            let batches = scanner.try_into_stream().await.map_err(&lance_err)?;
            Ok::<_, DataFusionError>(
                batches
                    .map_err(lance_err)
                    .and_then(move |batch| futures::future::ready(conform(batch, &conform_to))),
            )
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_round_trip_by_name() {
        for m in [Metric::L2, Metric::Cosine, Metric::Dot] {
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
        assert_eq!(Metric::parse("Euclidean"), Some(Metric::L2));
        assert_eq!(Metric::parse("hamming"), None);
    }
}
