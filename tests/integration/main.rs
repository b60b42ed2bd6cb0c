//! Integration tests: what SQL alone cannot reach (concurrency, process-level
//! state, the CLI binary, large generated query sets). One test binary.

#[path = "../common/fixtures.rs"]
mod fixtures;

mod cli;
mod codec;
mod contention;
mod differential;
mod faults;
mod fuzz;
mod index_pushdown;
mod merges;
mod reliability;
mod scans;
mod session;
mod snapshot;
mod util;
mod write_faults;
mod writes;
