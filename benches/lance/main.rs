//! Benchmarks: prints the tables quoted in README.md.
//!
//! ```text
//! make bench                                       # everything, 10M rows
//! cargo bench --bench lance -- --rows 2000000      # smaller data
//! cargo bench --bench lance -- --only read --iters 3
//! cargo bench --bench lance -- --only sessions --only insert
//! ```
//!
//! **read** — for each Lance storage version (2.0, 2.1, 2.2) it runs a scan-bound
//! TPC-H Q6-like query and an aggregation-bound Q1-like query through
//!
//! * this crate's `LanceTableProvider` (fragment groups as partitions),
//! * Lance's own `lance::datafusion::LanceTableProvider`,
//! * DataFusion over the same rows in Parquet,
//!
//! and decodes the queries' columns with Lance's raw `Scanner` (no
//! DataFusion) as the floor. Times are medians; "cores" is CPU time / wall
//! time. A second table measures 24 concurrent opens+scans of a
//! 4,000-fragment table with per-open sessions, one shared Lance session,
//! and this crate's shared session with single-flight loads (**sessions**).
//!
//! **insert** — `INSERT INTO ... SELECT` of the rows from a 4-partition
//! source through SQL, vs Lance's `InsertBuilder` on the same batches, vs a
//! naive sink committing every batch.
//!
//! **upsert**, **dml** — `lance_merge` and `MERGE INTO` vs
//! `MergeInsertBuilder` (1M and 10M source rows into 10M, and with a BTREE
//! index on the key; peak RSS per run), and 1% `DELETE`/`UPDATE` vs
//! Lance's builders.
//!
//! **contention** — per statement kind, the highest rate of competing
//! appends (another process) at which 10 of 10 statements commit with the
//! default commit budget (`--commit-budget RETRIES,TIMEOUT_MS` to try
//! others, `--rates 10,50,100` to choose the rates).
//!
//! **plans** — bytes of encoded physical and logical plans of a table with
//! 10, 1,000 and 10,000 fragments, next to its manifest
//! (`cargo bench --bench lance -- --only plans`).
//!
//! **cluster** — Q6/Q1-like reads and an `INSERT` of every row on a
//! scheduler and two executors (`lance-cluster` processes on 127.0.0.1) vs
//! one process, and the bytes of the stage a scan task receives for 10,
//! 1,000 and 10,000 fragments (`cargo bench --bench lance -- --only cluster`).
//!
//! **search** — top-10 vector search (IVF_PQ) through `lance_vector_search`
//! vs `Scanner::nearest`, exact top-10 through SQL vs Lance's exact search,
//! a point lookup with and without a BTREE index, and `lance_fts` vs
//! `Scanner::full_text_search` (`cargo bench --bench lance -- --only search`).
//!
//! **catalog** — attach a directory namespace of 1,000 tables, list them
//! and query one, in a new context, vs Lance's namespace API
//! (`cargo bench --bench lance -- --only catalog`).
//!
//! **fragments** — 1,000,000 rows in 100, 1,000, 10,000, 20,000 and 100,000
//! fragments: registration + planning, `count(*)`, a full and a selective
//! scan (no index, ZONEMAP, BTREE) vs Lance's own provider, a 1-row INSERT
//! and DELETE vs Lance's builders; also drawn as `docs/fragments.svg`
//! (`cargo bench --bench lance -- --only fragments [--fragments 100,1000]`).
//!
//! **cloud** — a `db://` table behind the fake LanceDB Cloud service on
//! 127.0.0.1 vs the same table read locally: a full scan and Q6-like over
//! 1,000,000 rows, the requests per statement, and an `INSERT` of them in
//! bounded requests (`cargo bench --bench lance -- --only cloud`).
//!
//! **permutation** — building a plan over the table vs the same ids
//! scanned and written with Lance by hand, and reading a shuffled
//! 1,000,000-row split vs Lance's `take_rows` with the same ids and a
//! sequential scan, with peak heap
//! (`cargo bench --bench lance -- --only permutation`).
//!
//! **statements** — one indexed vector search as a plain statement, as
//! `EXECUTE` of a prepared one, DataFusion's `SELECT 1` floor and Lance's
//! `Scanner::nearest`; 8 concurrent clients' queries per second; one search
//! at 1,000,000 × 128 (`cargo bench --bench lance -- --only statements`;
//! `--only statements-large` runs that last table alone).
//!
//! Every cell is the median of `--iters` (default 5) runs with min–max, the
//! sides of a comparison interleaved (A B A B ...) after one warm-up run
//! each. Ratios are "time ÷ baseline time": below 1 is faster than the
//! baseline. Generated data is kept under `target/bench-data` between runs.

mod catalog;
mod cloud;
mod cluster;
mod common;
mod contention;
mod dml;
#[path = "../../tests/common/fake_cloud.rs"]
mod fake_cloud;
mod fragments;
mod hybrid;

use common::args;
mod insert;
mod memory;
mod permutation;
mod plans;
mod read;
mod search;
mod statements;

#[global_allocator]
static ALLOC: memory::Counting = memory::Counting;

fn main() {
    let args = args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if args.sections.iter().any(|s| s == "upsert-child") {
        runtime.block_on(dml::upsert_child(&args, &args.variant));
        return;
    }
    if args.sections.iter().any(|s| s == "appender-child") {
        runtime.block_on(contention::appender_child(&args.variant));
        return;
    }
    std::fs::create_dir_all(&args.dir).expect("bench data directory");
    let run = |name: &str| args.sections.is_empty() || args.sections.iter().any(|s| s == name);
    runtime.block_on(async {
        if run("read") {
            read::query_table(&args).await;
        }
        if run("sessions") {
            read::session_table(&args).await;
        }
        if run("insert") {
            insert::insert_table(&args).await;
        }
        if run("upsert") {
            dml::upsert_table(&args).await;
        }
        if run("dml") {
            dml::dml_table(&args).await;
        }
        if run("contention") {
            contention::contention_table(&args).await;
        }
        if run("plans") {
            plans::plan_bytes_table(&args).await;
        }
        if run("cluster") {
            cluster::cluster_table(&args).await;
        }
        if run("search") {
            search::search_table(&args).await;
        }
        if run("catalog") {
            catalog::catalog_table(&args).await;
        }
        if run("fragments") {
            fragments::fragments_table(&args).await;
        }
        if run("cloud") {
            cloud::cloud_table(&args).await;
        }
        if run("permutation") {
            permutation::permutation_table(&args).await;
        }
        if run("statements") {
            statements::statements_table(&args).await;
        } else if args.sections.iter().any(|s| s == "statements-large") {
            // Only the last table of "statements" (to profile it alone).
            statements::large_table(&args).await;
        }
    });
    println!(
        "\nCells: median wall time (min–max) / cores used (CPU time ÷ wall time). Ratios: time ÷ \
         baseline time (below 1 = faster than the baseline), medians, with the extremes' ratio in \
         parentheses."
    );
}
