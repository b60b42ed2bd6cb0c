//! Table functions: `lance_cache_stats()`.

pub(crate) mod cache_stats;

pub use cache_stats::{CACHE_STATS_FUNCTION_NAME, CacheStatsFunction};
