//! Integration tests: what SQL alone cannot reach (concurrency, process-level
//! state, faults, the CLI binary, plans shipped between contexts, large
//! generated query sets). One test binary; one file per theme, shared
//! helpers in `support` (and the fixtures the sqllogictests use too).

#[path = "../common/fake_cloud.rs"]
mod fake_cloud;
#[path = "../common/fixtures.rs"]
mod fixtures;
mod support;

mod alter;
mod api;
mod catalog;
mod cli;
mod cloud;
mod cloud_catalog;
mod cloud_changes;
mod cloud_ddl;
mod cloud_indexes;
mod cloud_prefix;
mod cloud_retries;
mod cloud_search;
mod cloud_versions;
mod cluster;
mod codec;
mod concurrency;
mod contention;
mod differential;
mod errors;
mod extremes;
mod fuzz;
mod index_pushdown;
mod indexes;
mod lancedb_client;
mod layout;
mod memory;
mod merges;
mod permutation;
mod permutation_catalog;
mod permutation_validation;
mod read_faults;
mod repl;
mod rest_catalog;
mod s3;
mod scans;
mod secrets;
mod session;
mod snapshot;
mod time_travel;
mod vector;
mod write_faults;
mod writes;
