//! Writing: the writers, the commit node and the sink, the write target, the one
//! commit path every statement uses, the statement journal and in-flight marks
//! of a cluster's writers, and the metrics of committing nodes.

pub(crate) mod cloud_write;
pub(crate) mod commit;
pub(crate) mod fragment_rows;
pub(crate) mod in_flight;
pub(crate) mod journal;
pub(crate) mod sink;
pub(crate) mod target;
pub(crate) mod transaction;
pub(crate) mod write;
pub(crate) mod write_metrics;
pub(crate) mod writers;
