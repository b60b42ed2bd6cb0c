//! Upserts: the merge node and its options.

pub(crate) mod merge;
pub(crate) mod merge_options;
