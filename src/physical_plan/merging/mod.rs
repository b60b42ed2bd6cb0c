//! Upserts: the merge node and its options (and the `db://` form).

pub(crate) mod cloud_merge;
pub(crate) mod merge;
pub(crate) mod merge_options;
mod source_keys;

pub(crate) use source_keys::SourceKeys;
