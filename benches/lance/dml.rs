//! Upsert and row-level DML tables.
//!
//! * upsert of `rows / 10` source rows (half matching existing keys) into a
//!   `rows`-row table, of `rows` source rows into it, and of `rows / 10`
//!   into it with a BTREE index on the key: `lance_merge` and `MERGE INTO`
//!   through SQL vs Lance's `MergeInsertBuilder` on the same batches; each
//!   run in a child process so its peak RSS is its own;
//! * `DELETE` / `UPDATE` of 1% of the rows through SQL vs Lance's
//!   `DeleteBuilder` / `UpdateBuilder`.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Float64Array, Int64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion_lance::options::DEFAULT_STORAGE_VERSION;
use lance::Dataset;
use lance::dataset::{
    DeleteBuilder, MergeInsertBuilder, UpdateBuilder, WhenMatched, WhenNotMatched, WriteMode,
    WriteParams,
};

use crate::common::{Args, cpu_time, interleaved, ratio, side_with_setup, splitmix};
use crate::read::{config, run_sql};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Float64, false),
        Field::new("tag", DataType::Utf8, false),
    ]))
}

fn batch(ids: impl Iterator<Item = i64> + Clone, salt: u64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(Float64Array::from_iter_values(
                ids.clone()
                    .map(|i| (splitmix(i as u64 ^ salt) % 10_000) as f64),
            )),
            Arc::new(StringArray::from_iter_values(
                ids.map(|i| format!("t{}", i % 1000)),
            )),
        ],
    )
    .expect("batch")
}

async fn create_table(uri: &str, rows: usize, indexed: bool) {
    let batches: Vec<_> = (0..rows as i64)
        .step_by(100_000)
        .map(|s| Ok(batch(s..(s + 100_000).min(rows as i64), 1)))
        .collect();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: 1 << 20,
        data_storage_version: Some(DEFAULT_STORAGE_VERSION),
        ..Default::default()
    };
    let mut ds = Dataset::write(
        RecordBatchIterator::new(batches, schema()),
        uri,
        Some(params),
    )
    .await
    .expect("write table");
    if indexed {
        use lance::index::DatasetIndexExt;
        use lance_index::IndexType;
        use lance_index::scalar::ScalarIndexParams;
        ds.create_index(
            &["id"],
            IndexType::BTree,
            None,
            &ScalarIndexParams::default(),
            false,
        )
        .await
        .expect("btree");
    }
}

/// `n` source rows: half match existing keys (even ids), half are new.
fn upsert_source(rows: usize, n: usize) -> Vec<RecordBatch> {
    let n = n as i64;
    let matched = (0..n / 2).map(|i| i * 2);
    let new = (0..n / 2).map(move |i| rows as i64 + i);
    let ids: Vec<i64> = matched.chain(new).collect();
    ids.chunks(8192)
        .map(|c| batch(c.iter().copied(), 2))
        .collect()
}

fn current_rss_mb() -> f64 {
    status_kb("VmRSS:") / 1024.0
}

fn status_kb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The upsert scenarios: name, the table's rows ÷ the source's, whether
/// the key has a BTREE index.
const SCENARIOS: &[(&str, usize, bool)] = &[
    ("tenth", 10, false),
    ("all", 1, false),
    ("tenth-btree", 10, true),
];

/// Runs in a child process: one upsert variant (`side/scenario`), prints
/// `RESULT secs rss_mb ...`.
pub(crate) async fn upsert_child(args: &Args, variant: &str) {
    let (side, scenario) = variant.split_once('/').expect("side/scenario");
    let &(_, divisor, indexed) = SCENARIOS
        .iter()
        .find(|s| s.0 == scenario)
        .expect("scenario");
    let dir = tempfile::Builder::new()
        .prefix("upsert-bench-")
        .tempdir_in(&args.dir)
        .expect("dir");
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    create_table(&uri, args.rows, indexed).await;
    // Every side first runs every side's code once on a small table: the
    // peak RSS then counts the memory an upsert uses, not the pages of this
    // binary's code that a path runs for the first time (`RssFile`: 40 MB
    // of planner code the builder never runs; see README "Upsert").
    let warm = dir.path().join("warm.lance").to_string_lossy().to_string();
    create_table(&warm, 2_000, indexed).await;
    for side in ["sql", "merge-into", "lance"] {
        upsert(&warm, side, upsert_source(2_000, 200)).await;
    }
    let source = upsert_source(args.rows, args.rows / divisor);
    // What the warm-up freed goes back to the system, so the peak below
    // starts from live memory on every side.
    // SAFETY: malloc_trim only releases free heap pages; no pointer is used.
    unsafe { libc::malloc_trim(0) };
    let rss_before = current_rss_mb();
    // Reset the peak so it measures the upsert alone (Linux >= 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let cpu0 = cpu_time();
    let t = Instant::now();
    let (inserted, updated) = upsert(&uri, side, source).await;
    let secs = t.elapsed().as_secs_f64();
    let cores = (cpu_time() - cpu0).as_secs_f64() / secs;
    println!(
        "RESULT {secs:.3} {:.0} {:.0} {cores:.2} {inserted} {updated}",
        peak_rss_mb(),
        rss_before
    );
}

/// One upsert of `source` into the table at `uri` by `side`: rows inserted
/// and updated.
async fn upsert(uri: &str, side: &str, source: Vec<RecordBatch>) -> (u64, u64) {
    match side {
        "sql" | "merge-into" => {
            let ctx = datafusion_lance::lance_session_context(config(2));
            ctx.sql(&format!(
                "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
            ))
            .await
            .expect("register");
            ctx.register_table(
                "src",
                Arc::new(MemTable::try_new(schema(), vec![source]).expect("memtable")),
            )
            .expect("src");
            let out = if side == "sql" {
                ctx.sql("SELECT inserted, updated FROM lance_merge('t', (SELECT * FROM src), 'id')")
                    .await
                    .expect("plan")
                    .collect()
                    .await
                    .expect("merge")
            } else {
                use datafusion_lance::LanceSessionContextExt;
                ctx.lance_sql(
                    "MERGE INTO t USING src ON t.id = src.id \
                     WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
                )
                .await
                .expect("plan")
                .collect()
                .await
                .expect("merge")
            };
            let col =
                |i: usize| arrow::compute::cast(out[0].column(i), &DataType::Int64).expect("cast");
            let value = |i: usize| {
                col(i)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("int")
                    .value(0) as u64
            };
            (value(0), value(1))
        }
        _ => {
            // A caller keeping its batches while Lance runs, as a session
            // keeps a registered in-memory table (`lance-kept`).
            let kept = (side == "lance-kept").then(|| source.clone());
            let ds = Arc::new(Dataset::open(uri).await.expect("open"));
            let mut builder = MergeInsertBuilder::try_new(ds, vec!["id".into()]).expect("builder");
            builder
                .when_matched(WhenMatched::UpdateAll)
                .when_not_matched(WhenNotMatched::InsertAll);
            let (_, stats) = builder
                .try_build()
                .expect("job")
                .execute_batches(source)
                .await
                .expect("merge");
            drop(kept);
            (stats.num_inserted_rows, stats.num_updated_rows)
        }
    }
}

fn child(args: &Args, variant: &str) -> Option<Vec<String>> {
    let out = std::process::Command::new(std::env::current_exe().ok()?)
        .args([
            "--only",
            "upsert-child",
            "--variant",
            variant,
            "--rows",
            &args.rows.to_string(),
            "--dir",
            &args.dir.to_string_lossy(),
        ])
        .output()
        .ok()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.starts_with("RESULT "))?;
    Some(line.split_whitespace().skip(1).map(String::from).collect())
}

pub(crate) async fn upsert_table(args: &Args) {
    println!(
        "\n## Upsert into a {}-row table (50% of the source matched)\n",
        args.rows
    );
    println!(
        "Each run in its own process (a new table each time, the index built before the \
         timing), so its peak RSS is its own; {} runs per side, interleaved. Cells: median \
         (min–max). Ratio: time (and peak RSS) ÷ MergeInsertBuilder's in the same scenario.\n",
        args.iters
    );
    println!(
        "| scenario | upsert | time | ÷ builder | cores | peak RSS during the upsert | ÷ builder | inserted / updated |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let sides = [
        ("datafusion-lance: lance_merge(...) (SQL)", "sql"),
        (
            "datafusion-lance: MERGE INTO ... UPDATE SET * / INSERT *",
            "merge-into",
        ),
        (
            "Lance MergeInsertBuilder, the caller keeping its batches meanwhile",
            "lance-kept",
        ),
        ("Lance MergeInsertBuilder::execute_batches", "lance"),
    ];
    for &(scenario, divisor, indexed) in SCENARIOS {
        let title = format!(
            "{} into {}{}",
            args.rows / divisor,
            args.rows,
            if indexed { ", BTREE on the key" } else { "" }
        );
        let mut runs: Vec<Vec<Vec<f64>>> = vec![Vec::new(); sides.len()];
        let mut counts = vec![String::new(); sides.len()];
        for _ in 0..args.iters.max(1) {
            for (i, (_, side)) in sides.iter().enumerate() {
                match child(args, &format!("{side}/{scenario}")) {
                    Some(r) if r.len() == 6 => {
                        counts[i] = format!("{} / {}", r[4], r[5]);
                        runs[i].push(r.iter().filter_map(|v| v.parse().ok()).collect());
                    }
                    _ => eprintln!("upsert child {side}/{scenario} failed"),
                }
            }
        }
        let column = |results: &[Vec<f64>], i: usize| -> (f64, f64, f64) {
            let mut v: Vec<f64> = results.iter().map(|r| r[i]).collect();
            v.sort_by(|a, b| a.total_cmp(b));
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        let builder = runs
            .last()
            .filter(|r| !r.is_empty())
            .map(|r| (column(r, 0), column(r, 1)));
        for (((label, _), results), counts) in sides.iter().zip(&runs).zip(&counts) {
            if results.is_empty() {
                println!("| {title} | {label} | failed | | | | | |");
                continue;
            }
            let (t, t_min, t_max) = column(results, 0);
            let (rss, rss_min, rss_max) = column(results, 1);
            let (cores, _, _) = column(results, 3);
            let versus = |ours: (f64, f64, f64), theirs: Option<(f64, f64, f64)>| {
                theirs.map_or(String::new(), |(b, b_min, b_max)| {
                    format!(
                        "{:.2}× ({:.2}–{:.2})",
                        ours.0 / b,
                        ours.1 / b_max,
                        ours.2 / b_min
                    )
                })
            };
            println!(
                "| {title} | {label} | {t:.3} s ({t_min:.3}–{t_max:.3}) | {} | {cores:.1} | \
                 {rss:.0} MB ({rss_min:.0}–{rss_max:.0}) | {} | {counts} |",
                versus((t, t_min, t_max), builder.map(|b| b.0)),
                versus((rss, rss_min, rss_max), builder.map(|b| b.1)),
            );
        }
    }
}

/// A copy of the table at `from` in `dir` (runs that change a table each
/// start from the same state without rewriting it).
fn copy_table(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_table(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

pub(crate) async fn dml_table(args: &Args) {
    let base = args.dir.join(format!("dml-base-{}.lance", args.rows));
    if !crate::common::exists(&base) {
        create_table(&base.to_string_lossy(), args.rows, false).await;
    }
    println!("\n## DELETE / UPDATE of 1% of a {}-row table\n", args.rows);
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores; every run starts from a \
         fresh copy of the same table (copied outside the timing). Ratio: SQL time ÷ builder \
         time.\n",
        args.iters
    );
    println!("| statement | datafusion-lance (SQL) | Lance builder | ÷ builder |");
    println!("|---|---|---|---|");
    let fresh_copy = || {
        let base = base.clone();
        let dir = tempfile::Builder::new()
            .prefix("dml-bench-")
            .tempdir_in(&args.dir)
            .expect("dir");
        async move {
            let path = dir.path().join("t.lance");
            copy_table(&base, &path);
            (dir, path.to_string_lossy().to_string())
        }
    };
    for statement in ["DELETE", "UPDATE"] {
        let sql = if statement == "DELETE" {
            "DELETE FROM t WHERE id % 100 = 7"
        } else {
            "UPDATE t SET v = v + 1 WHERE id % 100 = 7"
        };
        let stats = interleaved(
            args.iters,
            &mut [
                side_with_setup(
                    fresh_copy,
                    move |(dir, uri): (tempfile::TempDir, String)| async move {
                        let ctx = datafusion_lance::lance_session_context(config(2));
                        ctx.sql(&format!(
                            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
                        ))
                        .await
                        .expect("register");
                        run_sql(&ctx, sql).await;
                        drop(dir);
                    },
                ),
                side_with_setup(
                    fresh_copy,
                    move |(dir, uri): (tempfile::TempDir, String)| async move {
                        let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
                        if statement == "DELETE" {
                            DeleteBuilder::new(ds, "id % 100 = 7")
                                .execute()
                                .await
                                .expect("delete");
                        } else {
                            UpdateBuilder::new(ds)
                                .update_where("id % 100 = 7")
                                .expect("where")
                                .set("v", "v + 1")
                                .expect("set")
                                .build()
                                .expect("build")
                                .execute()
                                .await
                                .expect("update");
                        }
                        drop(dir);
                    },
                ),
            ],
        )
        .await;
        println!(
            "| {statement} 1% (`id % 100 = 7`) | {} | {} | {} |",
            stats[0].cell(),
            stats[1].cell(),
            ratio(&stats[0], &stats[1])
        );
    }
}
