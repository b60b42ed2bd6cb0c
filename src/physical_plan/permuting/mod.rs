//! Permutation plans: the format ([`format`]), assigning rows to splits
//! ([`assign`]), validation and identity ([`validate`]), and the nodes that
//! build ([`split`], [`build`]) and read ([`read`]) them.

pub(crate) mod assign;
pub(crate) mod build;
pub(crate) mod format;
pub(crate) mod read;
pub(crate) mod split;
pub(crate) mod validate;
