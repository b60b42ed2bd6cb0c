//! Permutation plans beyond what SQL files show: reads split across
//! workers through the codecs, checkpoints resumed (and refused for another
//! plan), a build racing an append, and LanceDB's own client reading our
//! plans and building plans we read (plans corrupted by hand:
//! `permutation_validation.rs`).

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::physical_plan::{ExecutionPlanProperties, collect};
use datafusion::prelude::SessionContext;
use datafusion_lance::{LanceLogicalCodec, LancePhysicalCodec, LanceSessionContextExt};
use datafusion_proto::bytes::{
    logical_plan_to_bytes_with_extension_codec, physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};
use futures::TryStreamExt;

use crate::fixtures::numbers;
use crate::support::{context, dataset_path, ok, private_cache, run_decoded, sql};

/// The `id` column of `batches`, in order.
pub(crate) fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let c = cast(b.column_by_name("id").expect("id"), &DataType::Int64).unwrap();
            c.as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect()
}

/// `query` planned and resolved, as a logical plan is encoded.
async fn resolved(ctx: &SessionContext, query: &str) -> datafusion::logical_expr::LogicalPlan {
    let state = ctx.state();
    let plan = datafusion_lance::plan_sql(&state, query).await.unwrap();
    datafusion_lance::resolve_lance_tables(state.optimize(&plan).unwrap(), &state)
        .await
        .unwrap()
}

/// The one string of a one-row, one-column result.
async fn text(ctx: &SessionContext, query: &str) -> String {
    let batches = sql(ctx, query)
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    let c = cast(batches[0].column(0), &DataType::Utf8).unwrap();
    c.as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .value(0)
        .to_string()
}

pub(crate) async fn error(ctx: &SessionContext, query: &str) -> String {
    match sql(ctx, query).await {
        Ok(_) => panic!("{query} succeeded"),
        Err(e) => e.to_string(),
    }
}

/// A context over the `numbers` table (1000 ids in 10 fragments, some
/// deleted) registered as `base`, and a built plan `plan` of it.
pub(crate) async fn setup(dir: &tempfile::TempDir) -> (SessionContext, String, String) {
    let base = dataset_path(dir, "base.lance");
    numbers(&base).await;
    let ctx = context(4, &private_cache());
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE base STORED AS LANCE LOCATION '{base}'"),
    )
    .await;
    let plan = dataset_path(dir, "plan.lance");
    ok(
        &ctx,
        &format!(
            "SELECT * FROM lance_build_permutation('base', '{plan}', 'split=random', \
             'ratios=0.7,0.3', 'seed=11', 'names=train,test', 'shuffle=true', 'clump=4')"
        ),
    )
    .await;
    (ctx, base, plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_each_reading_one_range_through_the_codec_read_the_split_once_in_plan_order() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _base, plan) = setup(&dir).await;
    let whole = ids(&sql(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{plan}', 'train')"),
    )
    .await
    .unwrap());
    assert_eq!(whole.len(), 658, "70% of the 941 live rows");

    // The read planned in 4 ranges, shipped as bytes, run by 4 "workers"
    // (fresh contexts with their own Lance sessions), one range each.
    let physical = ctx
        .lance_sql(&format!(
            "SELECT id, s FROM lance_permutation('{plan}', 'train', 'partitions=4')"
        ))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    assert_eq!(physical.output_partitioning().partition_count(), 4);
    let codec = LancePhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(physical, &codec).unwrap();
    let mut read = Vec::new();
    for partition in 0..4 {
        let worker = context(1, &private_cache());
        let plan =
            physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)
                .unwrap();
        let batches: Vec<RecordBatch> = plan
            .execute(partition, worker.task_ctx())
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let part = ids(&batches);
        assert!((164..=165).contains(&part.len()), "{}", part.len());
        read.extend(part);
    }
    assert_eq!(
        read, whole,
        "the ranges, in partition order, are the split in plan order"
    );

    // The logical plan travels too (the plan's summary with it).
    let logical = resolved(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{plan}', 'train')"),
    )
    .await;
    let bytes =
        logical_plan_to_bytes_with_extension_codec(&logical, &LanceLogicalCodec::new()).unwrap();
    let worker = context(2, &private_cache());
    assert_eq!(ids(&run_decoded(&worker, &bytes).await.unwrap()), whole);
}

/// A split larger than one take chunk (131,072 ids) read in small batches:
/// every row once, in plan order, across chunks and partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_larger_than_a_take_chunk_reads_in_plan_order_in_batch_size_slices() {
    let dir = tempfile::tempdir().unwrap();
    // One fragment: a row's address is its position, which is its id.
    let base = dataset_path(&dir, "big.lance");
    crate::fixtures::write(
        &base,
        vec![crate::fixtures::numbers_batch(0, 300_000)],
        crate::fixtures::params(lance::dataset::WriteMode::Create, 1_000_000),
    )
    .await;
    let ctx = context(1, &private_cache());
    ok(&ctx, "SET datafusion.execution.batch_size = 1000").await;
    let plan = dataset_path(&dir, "big_plan.lance");
    ok(
        &ctx,
        &format!(
            "SELECT * FROM lance_build_permutation('{base}', '{plan}', 'split=random', \
             'ratios=0.9,0.1', 'seed=5', 'shuffle=true')"
        ),
    )
    .await;
    ok(
        &ctx,
        &format!("CREATE EXTERNAL TABLE p STORED AS LANCE LOCATION '{plan}'"),
    )
    .await;
    let order = ids(&sql(
        &ctx,
        "SELECT CAST(row_id AS BIGINT) AS id FROM p WHERE split_id = 0",
    )
    .await
    .unwrap());
    assert_eq!(order.len(), 270_000);

    let batches = sql(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{plan}', 0)"),
    )
    .await
    .unwrap();
    assert!(
        batches.iter().all(|b| b.num_rows() <= 1000),
        "batch-size slices"
    );
    assert_eq!(ids(&batches), order, "the split in plan order");

    // Two ranges, each read in plan order; in partition order they are the
    // stretch of the split asked for (collecting them together would
    // interleave the partitions).
    let physical = ctx
        .lance_sql(&format!(
            "SELECT id FROM lance_permutation('{plan}', 0, 'partitions=2', 'offset=100000', \
             'limit=150000')"
        ))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    assert_eq!(physical.output_partitioning().partition_count(), 2);
    let mut two = Vec::new();
    for partition in 0..2 {
        let batches: Vec<RecordBatch> = physical
            .execute(partition, ctx.task_ctx())
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        two.extend(ids(&batches));
    }
    assert_eq!(two, order[100_000..250_000].to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_travels_as_a_plan_and_commits_once_where_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _base, _plan) = setup(&dir).await;
    let plan = dataset_path(&dir, "shipped.lance");
    let query = format!(
        "SELECT split_name, rows FROM lance_build_permutation('base', '{plan}', \
         'split=hash', 'columns=id,s', 'weights=3,1', 'names=train,test')"
    );
    // Logical: encoded after planning pinned the base.
    let logical = resolved(&ctx, &query).await;
    let bytes =
        logical_plan_to_bytes_with_extension_codec(&logical, &LanceLogicalCodec::new()).unwrap();
    // EXPLAIN-like planning wrote nothing.
    assert!(!std::path::Path::new(&plan).exists());
    // Physical: the whole build (split, write, commit, report) on a worker.
    let physical = ctx
        .lance_sql(&query)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let codec = LancePhysicalCodec::new();
    let shipped = physical_plan_to_bytes_with_extension_codec(physical, &codec).unwrap();
    let worker = context(2, &private_cache());
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&shipped, &worker.task_ctx(), &codec)
            .unwrap();
    let report = collect(decoded, worker.task_ctx()).await.unwrap();
    assert_eq!(report[0].num_rows(), 2);
    let versions = lance::Dataset::open(&plan)
        .await
        .unwrap()
        .versions()
        .await
        .unwrap();
    assert_eq!(versions.len(), 1, "one commit");
    // The logical bytes, run elsewhere, now meet the plan it created.
    let again = run_decoded(&worker, &bytes).await.unwrap_err().to_string();
    assert!(
        again.contains("a table exists there") || again.contains("already exists"),
        "{again}"
    );
    // A hash split is the same for the same rows, wherever it is built.
    let local = dataset_path(&dir, "local.lance");
    ok(&ctx, &query.replace(&plan, &local)).await;
    for split in ["train", "test"] {
        let a = sql(
            &ctx,
            &format!("SELECT id FROM lance_permutation('{plan}', '{split}')"),
        )
        .await
        .unwrap();
        let b = sql(
            &ctx,
            &format!("SELECT id FROM lance_permutation('{local}', '{split}')"),
        )
        .await
        .unwrap();
        assert_eq!(ids(&a), ids(&b));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_resumes_at_its_offset_and_another_plans_identity_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, base, plan) = setup(&dir).await;
    let identity = text(
        &ctx,
        &format!("SELECT lance_permutation_identity('{plan}')"),
    )
    .await;
    let whole = ids(&sql(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{plan}', 'test')"),
    )
    .await
    .unwrap());
    // A worker stops after 100 rows, recording the identity and the offset.
    let first = ids(&sql(
        &ctx,
        &format!(
            "SELECT id FROM lance_permutation('{plan}', 'test', 'limit=100', 'identity={identity}')"
        ),
    )
    .await
    .unwrap());
    let rest = ids(&sql(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{plan}', 'test', 'offset=100', 'identity={identity}')"),
    )
    .await
    .unwrap());
    assert_eq!([first, rest].concat(), whole);

    // The same options over the same base build the same rows — but not
    // the same plan: a checkpoint of one resumed on the other is refused.
    let other = dataset_path(&dir, "other.lance");
    ok(
        &ctx,
        &format!(
            "SELECT * FROM lance_build_permutation('{base}', '{other}', 'split=random', \
             'ratios=0.7,0.3', 'seed=11', 'names=train,test', 'shuffle=true', 'clump=4')"
        ),
    )
    .await;
    let same = ids(&sql(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{other}', 'test')"),
    )
    .await
    .unwrap());
    assert_eq!(same, whole, "a seed gives the same plan");
    let refused = error(
        &ctx,
        &format!("SELECT id FROM lance_permutation('{other}', 'test', 'offset=100', 'identity={identity}')"),
    )
    .await;
    assert!(refused.contains("is not the plan expected"), "{refused}");
    assert!(
        refused.contains(&identity),
        "names the expected identity: {refused}"
    );
    assert!(
        refused.contains("other.lance@1"),
        "names its own: {refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_planned_before_an_append_reads_and_records_the_version_it_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, base, _plan) = setup(&dir).await;
    let pinned = lance::Dataset::open(&base).await.unwrap().version().version;
    let plan = dataset_path(&dir, "raced.lance");
    let build = ctx
        .lance_sql(&format!(
            "SELECT sum(rows) FROM lance_build_permutation('base', '{plan}', 'split=sequential', 'fixed=2')"
        ))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    // Another writer appends between planning and running.
    crate::support::append_elsewhere(&base, 5000, 500);
    assert_eq!(
        lance::Dataset::open(&base).await.unwrap().version().version,
        pinned + 1
    );
    let counted = collect(build, ctx.task_ctx()).await.unwrap();
    let counted = cast(counted[0].column(0), &DataType::Int64).unwrap();
    assert_eq!(
        counted
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0),
        941
    );
    let recorded = lance::Dataset::open(&plan).await.unwrap();
    assert_eq!(
        recorded.schema().metadata.get("base_version"),
        Some(&pinned.to_string())
    );
    let read = sql(
        &ctx,
        &format!("SELECT count(*), max(id) FROM lance_permutation('{plan}', 1)"),
    )
    .await
    .unwrap();
    let max = cast(read[0].column(1), &DataType::Int64).unwrap();
    assert!(max.as_any().downcast_ref::<Int64Array>().unwrap().value(0) < 1000);
}

/// Runs `tests/integration/lancedb/permutation.py` (LanceDB's Python
/// client, installed by `.ci/ensure-lancedb.sh`) with `args`, returning the
/// JSON it prints.
fn lancedb(args: &[&str]) -> serde_json::Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/integration/lancedb/permutation.py"
    );
    let out = std::process::Command::new(std::env::var("PYTHON").unwrap_or("python3".into()))
        .arg(script)
        .args(args)
        .output()
        .expect("python3 runs LanceDB's client");
    assert!(
        out.status.success(),
        "LanceDB's client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lancedb_reads_our_plans_and_we_read_its_plans_in_the_same_order() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, base, plan) = setup(&dir).await;
    let root = dir.path().to_str().unwrap();
    // LanceDB 0.40 reads each split of our plan as we do.
    let seen = lancedb(&["read", root, "base", "plan", "train", "test"]);
    for split in ["train", "test"] {
        let ours = ids(&sql(
            &ctx,
            &format!("SELECT id FROM lance_permutation('{plan}', '{split}')"),
        )
        .await
        .unwrap());
        let theirs: Vec<i64> = serde_json::from_value(seen[split].clone()).unwrap();
        assert_eq!(ours, theirs, "split {split}");
    }
    // LanceDB builds plans (written out with their metadata); we read them
    // — random with a shuffle, and an unshuffled hash split, whose rows are
    // not sorted by split — in LanceDB's order.
    let built = lancedb(&["build", root, "base"]);
    // LanceDB's hash plan is not sorted by split: the reader scans it.
    let hash = lance::Dataset::open(&format!("{root}/lancedb_hash.lance"))
        .await
        .unwrap();
    let splits = hash
        .scan()
        .project(&["split_id"])
        .unwrap()
        .try_into_batch()
        .await
        .unwrap();
    let splits = cast(splits.column(0), &DataType::Int64).unwrap();
    let splits = splits
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .values()
        .to_vec();
    assert!(
        splits.windows(2).any(|w| w[0] > w[1]),
        "unsorted: {splits:?}"
    );
    for (table, splits) in [("lancedb_random", ["a", "b"]), ("lancedb_hash", ["a", "b"])] {
        let uri = format!("{root}/{table}.lance");
        for split in splits {
            let ours = ids(&sql(
                &ctx,
                &format!("SELECT id FROM lance_permutation('{uri}', '{split}', 'base={base}')"),
            )
            .await
            .unwrap());
            let theirs: Vec<i64> = serde_json::from_value(built[table][split].clone()).unwrap();
            assert!(!theirs.is_empty());
            assert_eq!(ours, theirs, "{table} split {split}");
        }
    }
}

/// What a user types in `lance-sql`: a build and reads in one `-c` of several
/// statements, then the same reads from a `-f` file in another process.
#[test]
fn lance_sql_builds_and_reads_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let base = dataset_path(&dir, "b.lance");
    let plan = dataset_path(&dir, "p.lance");
    let create =
        format!("CREATE EXTERNAL TABLE b (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{base}'");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lance-sql"))
            .args(["-q", "--format", "csv"])
            .args(args)
            .output()
            .expect("run lance-sql");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let built = run(&[
        "-c",
        &create,
        "-c",
        &format!(
            "INSERT INTO b SELECT value FROM generate_series(1, 10); \
             SELECT split_name, rows FROM lance_build_permutation('b', '{plan}', \
             'split=sequential', 'sizes=6,4', 'names=train,test'); \
             SELECT id FROM lance_permutation('{plan}', 'test')"
        ),
    ]);
    assert_eq!(
        built,
        "count\n10\nsplit_name,rows\ntrain,6\ntest,4\nid\n7\n8\n9\n10\n"
    );
    let script = dir.path().join("read.sql");
    std::fs::write(
        &script,
        format!(
            "SELECT id FROM lance_permutation('{plan}', 'train', 'offset=4');\n\
             SELECT starts_with(lance_permutation_identity('{plan}'), \
             'permutation:v1:{plan}@1:{base}@2:2:') AS pinned;\n"
        ),
    )
    .unwrap();
    let read = run(&["-f", script.to_str().unwrap()]);
    assert_eq!(read, "id\n5\n6\npinned\ntrue\n");
}
