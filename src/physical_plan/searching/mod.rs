//! Search: vector and full-text search, and hybrid search over both.

pub(crate) mod hybrid;
pub(crate) mod search;
