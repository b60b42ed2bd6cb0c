//! Scalar functions: `lance_session_stats()`, `l2_distance(a, b)` and
//! `lance_permutation_identity(plan)`.
//!
//! They are registered by [`crate::register_lance`] and, on a cluster, in
//! every executor's function registry ([`scalar_functions`]), so a plan that
//! uses them decodes wherever its tasks run.

use std::sync::Arc;

use datafusion::logical_expr::ScalarUDF;

pub(crate) mod distance;
pub(crate) mod permutation_identity;
pub(crate) mod session_stats;

pub use distance::{L2_DISTANCE_FUNCTION_NAME, L2DistanceFunction};
pub use permutation_identity::{PERMUTATION_IDENTITY_FUNCTION_NAME, PermutationIdentityFunction};
pub use session_stats::{SESSION_STATS_FUNCTION_NAME, SessionStatsFunction};

/// Every scalar function this crate registers.
pub fn scalar_functions() -> Vec<Arc<ScalarUDF>> {
    vec![
        Arc::new(ScalarUDF::new_from_impl(SessionStatsFunction::default())),
        Arc::new(ScalarUDF::new_from_impl(L2DistanceFunction::default())),
        Arc::new(ScalarUDF::new_from_impl(
            PermutationIdentityFunction::default(),
        )),
    ]
}
