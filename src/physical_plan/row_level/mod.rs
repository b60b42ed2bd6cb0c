//! `DELETE` and `UPDATE`: the nodes and the row addresses they act on.

pub(crate) mod delete;
pub(crate) mod rows;
pub(crate) mod update;
