//! Table functions: `lance_cache_stats()`, `lance_versions('t')`, `lance_vacuum('t')`.
//!
//! They only build providers in `call_with_args`; reads happen in `scan`.

pub(crate) mod cache_stats;
pub(crate) mod vacuum;
pub(crate) mod versions;

pub use cache_stats::{CACHE_STATS_FUNCTION_NAME, CacheStatsFunction};
pub use vacuum::{VACUUM_FUNCTION_NAME, VacuumFunction};
pub use versions::{VERSIONS_FUNCTION_NAME, VersionsFunction};
