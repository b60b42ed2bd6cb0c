//! Integration tests: what SQL alone cannot reach (concurrency, process-level
//! state, the CLI binary, large generated query sets). One test binary.

#[path = "../common/fixtures.rs"]
mod fixtures;

mod cli;
mod differential;
mod faults;
mod fuzz;
mod merges;
mod reliability;
mod session;
mod snapshot;
mod util;
mod writes;
