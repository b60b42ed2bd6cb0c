//! `DELETE` and `UPDATE`: the nodes and the row addresses they act on (and
//! their one-request forms for `db://` tables).

pub(crate) mod cloud_change;
pub(crate) mod delete;
pub(crate) mod rows;
pub(crate) mod update;
