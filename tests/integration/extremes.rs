//! The extremes of every number a user can hand this crate — arguments
//! and options of every function, `LIMIT` through the index, settings,
//! version numbers — give an answer or an error, never a crash: each
//! statement runs in its own `lance-sql` process (a process that aborts,
//! as Lance does when asked to set up 10¹² result slots, fails the test
//! and no other test).

use std::process::Command;

use datafusion::prelude::SessionConfig;
use datafusion_lance::LanceSessionContextExt;

/// The values each number is tried with.
const EXTREMES: [&str; 6] = [
    "0",
    "-1",
    "4294967295",
    "1099511627776",
    "9223372036854775807",
    "18446744073709551615",
];

/// Rows of the table `v` the statements read.
const ROWS: i64 = 1000;

/// Statements with `{n}` where the number goes; `{i}` numbers each run
/// (for names that must be new).
const STATEMENTS: &[&str] = &[
    "SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], {n})",
    "SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 5, 'nprobes={n}')",
    "SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 5, 'refine_factor={n}')",
    "SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 5, 'ef={n}')",
    "SELECT count(*) FROM lance_vector_search('h', 'emb', [1.0, 2.0, 1.0, 2.0], {n}, 'ef={n}')",
    "SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], {n}, 'use_index=false')",
    "SELECT count(*) FROM (SELECT id FROM v ORDER BY l2_distance(emb, [1.0, 2.0, 1.0, 2.0]) LIMIT {n})",
    "SELECT count(*) FROM lance_fts('v', 'word1', 'limit={n}')",
    "SELECT count(*) FROM lance_fts('v', 'word1', 'fuzziness={n}')",
    "SELECT count(*) FROM lance_hybrid_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 'word1', {n})",
    "SELECT count(*) FROM lance_hybrid_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 'word1', 5, 'rrf_k={n}', 'nprobes={n}', 'refine_factor={n}')",
    "SELECT count(*) FROM lance_tag('v', 'create', 't{i}', {n})",
    "SELECT count(*) FROM lance_vacuum('v', 'older_than={n}d', 'orphans_older_than={n}s')",
    "SELECT count(*) FROM lance_optimize('v', 'target_rows_per_fragment={n}')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_FLAT', 'num_partitions={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_FLAT', 'num_partitions=2', 'sample_rate={n}', 'max_iterations={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_PQ', 'num_partitions=2', 'num_sub_vectors={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_PQ', 'num_partitions=2', 'num_sub_vectors=2', 'num_bits={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_HNSW_SQ', 'num_partitions=2', 'm={n}', 'ef_construction={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'x', 'emb', 'IVF_HNSW_SQ', 'num_partitions=2', 'ef_construction={n}', 'replace=true')",
    "SELECT count(*) FROM lance_create_index('v', 'y', 'txt', 'INVERTED', 'max_token_length={n}', 'replace=true')",
    "SELECT count(*) FROM v VERSION AS OF {n}",
    "SELECT count(*) FROM lance_as_of('v', {n})",
    "SELECT count(*) FROM (SELECT * FROM v LIMIT {n})",
    "SELECT count(*) FROM (SELECT * FROM v LIMIT 5 OFFSET {n})",
    "SET lance.batch_size = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.scan_partitions = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.fragment_readahead = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.batch_readahead = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.io_buffer_size = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.metadata_cache_bytes = {n}; SELECT count(*) FROM v WHERE id > 3",
    "SET lance.index_cache_bytes = {n}; SELECT count(*) FROM lance_vector_search('v', 'emb', [1.0, 2.0, 1.0, 2.0], 3)",
    "SET lance.max_rows_per_file = {n}; SET lance.max_rows_per_group = {n}; COPY (SELECT * FROM v) TO 'copy{i}.lance' STORED AS LANCE",
    "SET lance.commit_max_retries = {n}; SET lance.commit_retry_timeout_ms = {n}; INSERT INTO w VALUES (1)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_numbers_give_answers_or_errors_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = datafusion_lance::lance_session_context(SessionConfig::new());
    for (name, index) in [("v", "IVF_FLAT"), ("h", "IVF_HNSW_SQ")] {
        let uri = dir.path().join(format!("{name}.lance"));
        for sql in [
            format!(
                "COPY (SELECT CAST(value AS BIGINT) AS id, 'word' || CAST(value % 7 AS VARCHAR) AS txt, \
                 arrow_cast(make_array(CAST(value % 13 AS FLOAT), CAST(value % 7 AS FLOAT), 1.0, 2.0), \
                 'FixedSizeList(4, Float32)') AS emb FROM generate_series(0, {})) \
                 TO '{}' STORED AS LANCE",
                ROWS - 1,
                uri.display()
            ),
            format!(
                "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{}'",
                uri.display()
            ),
            format!(
                "CREATE INDEX {name}_emb ON {name} USING {index} (emb) WITH (num_partitions = 4)"
            ),
            format!("CREATE INDEX {name}_txt ON {name} USING INVERTED (txt)"),
        ] {
            ctx.lance_sql(&sql).await.unwrap().collect().await.unwrap();
        }
    }
    let w = dir.path().join("w.lance");
    let setup = format!(
        "CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{}'; \
         CREATE EXTERNAL TABLE h STORED AS LANCE LOCATION '{}'; \
         CREATE EXTERNAL TABLE w (x BIGINT) STORED AS LANCE LOCATION '{}'",
        dir.path().join("v.lance").display(),
        dir.path().join("h.lance").display(),
        w.display()
    );
    let mut run = 0;
    for template in STATEMENTS {
        for n in EXTREMES {
            run += 1;
            let statement = template.replace("{n}", n).replace("{i}", &run.to_string());
            let out = Command::new(env!("CARGO_BIN_EXE_lance-sql"))
                .current_dir(dir.path())
                .args(["-q", "--format", "csv", "-c", &setup, "-c", &statement])
                .output()
                .expect("run lance-sql");
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            let what = format!("{statement}\nstdout: {stdout}\nstderr: {stderr}");
            // Exit status 0 or 1: not killed by a signal (an abort), not a
            // panic (101).
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{:?}: {what}",
                out.status
            );
            assert!(!stderr.contains("panicked"), "a panic: {what}");
            if out.status.success() {
                // Every count is one the table can give.
                for line in stdout.lines().filter(|l| l.parse::<i64>().is_ok()) {
                    let count: i64 = line.parse().unwrap();
                    assert!((0..=ROWS).contains(&count), "{count} rows: {what}");
                }
            } else {
                assert!(stderr.starts_with("Error: "), "not a clear error: {what}");
            }
        }
    }
}
