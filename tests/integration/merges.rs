//! Upserts and row-level DML under concurrency, across processes, and
//! against an in-memory model.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use datafusion::prelude::SessionContext;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Barrier;

use crate::support::{context, dataset_path, ints, private_cache, run, sorted_rows};

async fn table(ctx: &SessionContext, uri: &str, primary_key: bool) {
    let key = if primary_key {
        ", PRIMARY KEY (id)"
    } else {
        ""
    };
    run(
        ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR{key}) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
}

/// `writers` contexts merge the same new keys 0..n at the same time.
async fn same_new_keys(primary_key: bool) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let cache = private_cache();
    let ctx = context(2, &cache);
    table(&ctx, &uri, primary_key).await;
    let writers = 4;
    let barrier = Arc::new(Barrier::new(writers));
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (barrier, cache, uri) = (Arc::clone(&barrier), Arc::clone(&cache), uri.clone());
            tokio::spawn(async move {
                let ctx = context(2, &cache);
                run(&ctx, &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'")).await;
                barrier.wait().await;
                run(
                    &ctx,
                    &format!(
                        "SELECT * FROM lance_merge('t', (SELECT value AS id, {w} AS v, 'w{w}' AS tag \
                         FROM generate_series(0, 299)), 'id')"
                    ),
                )
                .await;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM t"
        )
        .await,
        vec![300, 300, 0, 299],
        "every key exactly once (primary key: {primary_key})"
    );
    // Every row comes from one writer's statement as a whole.
    assert_eq!(ints(&ctx, "SELECT count(DISTINCT v) FROM t").await, vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_merges_of_the_same_new_keys_with_a_primary_key() {
    same_new_keys(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_merges_of_the_same_new_keys_without_a_primary_key() {
    same_new_keys(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disjoint_concurrent_merges_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let cache = private_cache();
    let ctx = context(2, &cache);
    table(&ctx, &uri, true).await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, 0, 'seed' FROM generate_series(0, 999)",
    )
    .await;
    let v0 = ints(&ctx, "SELECT max(version) FROM lance_versions('t')").await[0];
    let barrier = Arc::new(Barrier::new(4));
    let tasks: Vec<_> = (0..4i64)
        .map(|w| {
            let (barrier, cache, uri) = (Arc::clone(&barrier), Arc::clone(&cache), uri.clone());
            tokio::spawn(async move {
                let ctx = context(2, &cache);
                run(
                    &ctx,
                    &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
                )
                .await;
                barrier.wait().await;
                // updates 250 existing keys and inserts 250 new ones, all its own
                run(
                    &ctx,
                    &format!(
                        "SELECT * FROM lance_merge('t', (SELECT value AS id, 1 AS v, 'w' AS tag \
                         FROM generate_series({}, {})), 'id')",
                        w * 250,
                        w * 250 + 249
                    ),
                )
                .await;
                run(
                    &ctx,
                    &format!(
                        "SELECT * FROM lance_merge('t', (SELECT value AS id, 2 AS v, 'n' AS tag \
                         FROM generate_series({}, {})), 'id')",
                        10_000 + w * 250,
                        10_000 + w * 250 + 249
                    ),
                )
                .await;
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id), sum(v) FROM t").await,
        vec![2000, 2000, 1000 + 2000]
    );
    assert_eq!(
        ints(&ctx, "SELECT max(version) FROM lance_versions('t')").await,
        vec![v0 + 8]
    );
}

/// Separate processes (lance-sql) merging the same new keys into a table
/// with a primary key: Lance's key conflict detection keeps each key once.
/// The processes overlap for real: each registers the table and reports
/// ready, and only when all three are ready do they get their MERGE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merges_from_separate_processes_keep_each_key_once() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    table(&ctx, &uri, true).await;
    let mut children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_lance-sql"))
                .args(["-q", "--format", "csv"])
                // The REPL keeps its history in the working directory.
                .current_dir(dir.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Barrier: every process has opened the table before any merges.
    let mut outputs = Vec::new();
    for child in children.iter_mut() {
        let stdin = child.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}';\nSELECT 'ready' AS state;"
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .by_ref()
            .map(|l| l.unwrap())
            .any(|l| l.trim() == "ready");
        assert!(ready, "a lance-sql process never got ready");
        outputs.push(lines);
    }
    for (w, child) in children.iter_mut().enumerate() {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(
            stdin,
            "SELECT inserted FROM lance_merge('t', (SELECT value AS id, {w} AS v, 'p' AS tag \
             FROM generate_series(0, 199)), 'id');\n\\q"
        )
        .unwrap();
    }
    let mut inserted = 0;
    for (child, lines) in children.iter_mut().zip(outputs) {
        inserted += lines
            .map(|l| l.unwrap())
            .filter_map(|l| l.trim().parse::<i64>().ok())
            .sum::<i64>();
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(inserted, 200, "each key inserted by exactly one process");
    assert_eq!(
        ints(&ctx, "SELECT count(*), count(DISTINCT id) FROM t").await,
        vec![200, 200]
    );
}

/// The model: id → (v, tag).
type Model = BTreeMap<i64, (Option<i64>, String)>;

fn model_rows(model: &Model) -> Vec<String> {
    let mut rows: Vec<String> = model
        .iter()
        .map(|(id, (v, tag))| {
            format!(
                "{id}|{}|{tag}",
                v.map_or("NULL".to_string(), |v| v.to_string())
            )
        })
        .collect();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_dml_sequences_match_a_model() {
    const SEED: u64 = 0xd31e7e;
    const STATEMENTS: usize = 220;
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(3, &private_cache());
    table(&ctx, &uri, true).await;
    run(&ctx, "SET lance.max_rows_per_file = 64").await;
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut model = Model::new();
    let mut next_id = 0i64;
    for i in 0..STATEMENTS {
        let (a, m) = (
            rng.random_range(0..next_id.max(1) + 50),
            rng.random_range(2..7i64),
        );
        let r = rng.random_range(0..m);
        let sql = match rng.random_range(0..5) {
            0 => {
                let n = rng.random_range(1..40);
                let sql = format!(
                    "INSERT INTO t SELECT value, value % 7, 'i{i}' FROM generate_series({next_id}, {})",
                    next_id + n - 1
                );
                for id in next_id..next_id + n {
                    model.insert(id, (Some(id % 7), format!("i{i}")));
                }
                next_id += n;
                sql
            }
            1 => {
                model.retain(|id, _| !(*id >= a && id % m == r));
                format!("DELETE FROM t WHERE id >= {a} AND id % {m} = {r}")
            }
            2 => {
                for (id, row) in model.iter_mut() {
                    if *id < a && id % m == r {
                        row.0 = row.0.map(|v| v + 1);
                        row.1 = format!("u{i}");
                    }
                }
                format!("UPDATE t SET v = v + 1, tag = 'u{i}' WHERE id < {a} AND id % {m} = {r}")
            }
            3 => {
                // an upsert mixing existing and new keys (keys unique)
                let lo = rng.random_range(0..next_id.max(1));
                let hi = lo + rng.random_range(1..30);
                for id in lo..hi {
                    model.insert(id, (Some(-id), format!("m{i}")));
                }
                next_id = next_id.max(hi);
                format!(
                    "SELECT * FROM lance_merge('t', (SELECT value AS id, -value AS v, 'm{i}' AS tag \
                     FROM generate_series({lo}, {})), 'id')",
                    hi - 1
                )
            }
            _ => {
                // delete through a subquery
                let ids: Vec<i64> = model
                    .keys()
                    .copied()
                    .filter(|id| id % m == r)
                    .take(5)
                    .collect();
                for id in &ids {
                    model.remove(id);
                }
                let list = if ids.is_empty() {
                    "-1".to_string()
                } else {
                    ids.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "DELETE FROM t WHERE id IN (SELECT value FROM generate_series(0, 100000) WHERE value IN ({list}))"
                )
            }
        };
        run(&ctx, &sql).await;
        if i % 40 == 39 || i == STATEMENTS - 1 {
            let batches = ctx
                .sql("SELECT id, v, tag FROM t")
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            assert_eq!(
                sorted_rows(&batches),
                model_rows(&model),
                "table and model differ after statement {i} (seed {SEED:#x}): {sql}"
            );
        }
    }
}

/// A merge whose source is computed from the target reads the statement's
/// version; when another writer changes the same rows before the merge
/// commits, the merge fails with the conflict error instead of writing rows
/// computed from the old version over the new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_from_its_own_table_never_undoes_a_concurrent_update() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    table(&ctx, &uri, true).await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, 1, 'a' FROM generate_series(0, 99)",
    )
    .await;
    let plan = ctx
        .sql("SELECT * FROM lance_merge('t', (SELECT id, v + 1 AS v, tag FROM t WHERE id < 10), 'id')")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    // Another process sets v = 100 on the same rows.
    update_elsewhere(&uri, "id < 10", "v", "100");
    let err = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a concurrent write conflicts with this statement"),
        "{err}"
    );
    assert_eq!(
        ints(&ctx, "SELECT count(*), min(v), max(v) FROM t WHERE id < 10").await,
        vec![10, 100, 100],
        "the other writer's update stands"
    );
}

/// `UPDATE SET` of chosen columns with `INSERT *` completes each source row
/// from its target row at the statement's version: when another writer
/// changes those rows before the merge commits, the merge fails with the
/// conflict error instead of writing the old values of the other columns
/// back over the new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_completing_rows_from_the_table_never_undoes_a_concurrent_update() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    table(&ctx, &uri, true).await;
    run(
        &ctx,
        "INSERT INTO t SELECT value, 1, 'a' FROM generate_series(0, 99)",
    )
    .await;
    let statement = "MERGE INTO t USING (SELECT value AS id, 7 AS v, 'new' AS tag \
                     FROM generate_series(5, 14)) AS s ON t.id = s.id \
                     WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *";
    let state = ctx.state();
    let logical = datafusion_lance::plan_lance_sql(&state, statement)
        .await
        .unwrap()
        .expect("MERGE INTO is planned by this crate");
    let plan = state.create_physical_plan(&logical).await.unwrap();
    // Another process sets tag = 'other' on the rows the merge updates.
    update_elsewhere(&uri, "id < 10", "tag", "'other'");
    let err = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a concurrent write conflicts with this statement"),
        "{err}"
    );
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*), min(v), max(v) FROM t WHERE id < 10 AND tag = 'other'"
        )
        .await,
        vec![10, 1, 1],
        "the other writer's update stands"
    );
    // Run again, it merges on the new version: v changes, tag stays.
    crate::support::sql(&ctx, statement).await.unwrap();
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*) FROM t WHERE id BETWEEN 5 AND 9 AND v = 7 AND tag = 'other'"
        )
        .await,
        vec![5]
    );
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*) FROM t WHERE id BETWEEN 10 AND 14 AND v = 7 AND tag = 'a'"
        )
        .await,
        vec![5]
    );
    assert_eq!(ints(&ctx, "SELECT count(*) FROM t").await, vec![100]);
}

/// Lance itself, on a runtime of its own (another writer), sets `column` to
/// the SQL `value` where `predicate` holds, and commits.
fn update_elsewhere(uri: &str, predicate: &str, column: &str, value: &str) {
    let (uri, predicate, column, value) = (
        uri.to_string(),
        predicate.to_string(),
        column.to_string(),
        value.to_string(),
    );
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let ds = Arc::new(lance::Dataset::open(&uri).await.unwrap());
            lance::dataset::UpdateBuilder::new(ds)
                .update_where(&predicate)
                .unwrap()
                .set(&column, &value)
                .unwrap()
                .build()
                .unwrap()
                .execute()
                .await
                .unwrap();
        });
    })
    .join()
    .unwrap();
}
