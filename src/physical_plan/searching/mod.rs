//! Search: vector and full-text search, and hybrid search over both.

mod cloud_query;
pub(crate) mod cloud_search;
pub(crate) mod hybrid;
pub(crate) mod search;
