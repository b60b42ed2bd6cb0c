//! Permutation plans beyond what SQL files show: reads split across
//! workers through the codecs, checkpoints resumed (and refused for another
//! plan), a build racing an append, plans corrupted by hand, and LanceDB's
//! own client reading our plans and building plans we read.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_plan::{ExecutionPlanProperties, collect};
use datafusion::prelude::SessionContext;
use datafusion_lance::{LanceLogicalCodec, LancePhysicalCodec, LanceSessionContextExt};
use datafusion_proto::bytes::{
    logical_plan_to_bytes_with_extension_codec, physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};
use futures::TryStreamExt;
use lance::dataset::WriteMode;

use crate::fixtures::{numbers, params, write};
use crate::support::{context, dataset_path, ok, private_cache, run_decoded, sql};

/// The `id` column of `batches`, in order.
fn ids(batches: &[RecordBatch]) -> Vec<i64> {
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

async fn error(ctx: &SessionContext, query: &str) -> String {
    match sql(ctx, query).await {
        Ok(_) => panic!("{query} succeeded"),
        Err(e) => e.to_string(),
    }
}

/// A context over the `numbers` table (1000 ids in 10 fragments, some
/// deleted) registered as `base`, and a built plan `plan` of it.
async fn setup(dir: &tempfile::TempDir) -> (SessionContext, String, String) {
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

/// A plan written by hand: name, row ids, split ids, split id type,
/// metadata, and the error expected.
type Case<'a> = (
    &'a str,
    ArrayRef,
    Vec<i64>,
    DataType,
    Vec<(&'a str, &'a str)>,
    &'a str,
);

/// Writes a plan by hand: `row_ids`, `split_ids` (as `split_type`) and
/// `metadata`.
async fn hand_plan(
    uri: &str,
    row_ids: ArrayRef,
    split_ids: Vec<i64>,
    split_type: DataType,
    metadata: &[(&str, &str)],
) {
    let metadata: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("row_id", row_ids.data_type().clone(), false),
            Field::new("split_id", split_type.clone(), true),
        ],
        metadata,
    ));
    let splits = cast(
        &(Arc::new(Int64Array::from(split_ids)) as ArrayRef),
        &split_type,
    )
    .unwrap();
    let batch = RecordBatch::try_new(schema, vec![row_ids, splits]).unwrap();
    write(uri, vec![batch], params(WriteMode::Create, 1000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_that_are_not_what_they_say_are_refused_before_any_row_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, base, _plan) = setup(&dir).await;
    let base_version = lance::Dataset::open(&base)
        .await
        .unwrap()
        .version()
        .version
        .to_string();
    let v = base_version.as_str();
    let addresses = |ids: &[u64]| Arc::new(UInt64Array::from(ids.to_vec())) as ArrayRef;
    let u64t = DataType::UInt64;
    let names = r#"["train","test"]"#;
    let cases: Vec<Case> = vec![
        (
            "no_version",
            addresses(&[0, 1]),
            vec![0, 1],
            u64t.clone(),
            vec![("split_names", names)],
            "its schema metadata has no 'base_version'",
        ),
        (
            "bad_version",
            addresses(&[0, 1]),
            vec![0, 1],
            u64t.clone(),
            vec![("base_version", "seven")],
            "'base_version' is 'seven', not a version number",
        ),
        (
            "gap",
            addresses(&[0, 1]),
            vec![0, 2],
            u64t.clone(),
            vec![("base_version", v)],
            "split ids are not exactly 0..2: split 1 has no rows",
        ),
        (
            "too_few_names",
            addresses(&[0, 1, 2]),
            vec![0, 1, 2],
            u64t.clone(),
            vec![("base_version", v), ("split_names", names)],
            "it has split ids up to 2, but 'split_names' names 2 splits",
        ),
        (
            "named_twice",
            addresses(&[0, 1]),
            vec![0, 1],
            u64t.clone(),
            vec![("base_version", v), ("split_names", r#"["a","a"]"#)],
            "'split_names' names split 'a' twice",
        ),
        (
            "not_json",
            addresses(&[0, 1]),
            vec![0, 1],
            u64t.clone(),
            vec![("base_version", v), ("split_names", "train,test")],
            "'split_names' is not a JSON array of strings",
        ),
        (
            "signed_ids",
            Arc::new(Int64Array::from(vec![0i64, 1])),
            vec![0, 1],
            u64t.clone(),
            vec![("base_version", v)],
            "'row_id' is Int64, not UInt64",
        ),
        (
            "negative_split",
            addresses(&[0, 1]),
            vec![0, -1],
            DataType::Int64,
            vec![("base_version", v)],
            "row 1 has split id -1",
        ),
        (
            "past_fragment",
            addresses(&[0, 150]),
            vec![0, 0],
            u64t.clone(),
            vec![("base_version", v)],
            "row 1 names row address 150, which is not in version",
        ),
        (
            "missing_version",
            addresses(&[0]),
            vec![0],
            u64t.clone(),
            vec![("base_version", "99")],
            "version 99 of its base",
        ),
        (
            "branch",
            addresses(&[0]),
            vec![0],
            u64t.clone(),
            vec![("base_version", v), ("base_branch", "dev")],
            "its base is on branch 'dev'",
        ),
    ];
    for (name, row_ids, splits, split_type, metadata, expected) in cases {
        let uri = dataset_path(&dir, &format!("{name}.lance"));
        hand_plan(&uri, row_ids, splits, split_type, &metadata).await;
        let e = error(
            &ctx,
            &format!("SELECT * FROM lance_permutation('{uri}', 0, 'base={base}')"),
        )
        .await;
        assert!(
            e.contains(&format!("permutation plan '{uri}'")),
            "{name}: {e}"
        );
        assert!(
            e.contains(expected),
            "{name}: expected '{expected}' in: {e}"
        );
    }
    // A plan without a recorded base needs one named; a named one must agree.
    let loose = dataset_path(&dir, "loose.lance");
    hand_plan(
        &loose,
        addresses(&[3, 1]),
        vec![0, 0],
        u64t.clone(),
        &[("base_version", v)],
    )
    .await;
    let e = error(
        &ctx,
        &format!("SELECT * FROM lance_permutation('{loose}', 0)"),
    )
    .await;
    assert!(
        e.contains("name the base with 'base=<table or location>'"),
        "{e}"
    );
    assert_eq!(
        ids(&sql(
            &ctx,
            &format!("SELECT id FROM lance_permutation('{loose}', 0, 'base=base')")
        )
        .await
        .unwrap()),
        [3, 1]
    );
    let plan = dataset_path(&dir, "plan.lance");
    let e = error(
        &ctx,
        &format!("SELECT * FROM lance_permutation('{plan}', 0, 'base={loose}')"),
    )
    .await;
    assert!(e.contains("it was built over"), "{e}");
    // A deleted row (id 5 % 17 is deleted) is named when read.
    let deleted = dataset_path(&dir, "deleted.lance");
    hand_plan(
        &deleted,
        addresses(&[4, 5]),
        vec![0, 0],
        u64t,
        &[("base_version", v)],
    )
    .await;
    let e = error(
        &ctx,
        &format!("SELECT * FROM lance_permutation('{deleted}', 0, 'base=base')"),
    )
    .await;
    assert!(
        e.contains("1 of 2 row ids of a chunk are not in version"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_whose_base_version_was_cleaned_up_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, base, plan) = setup(&dir).await;
    ok(&ctx, "DELETE FROM base WHERE id = 0").await;
    ok(&ctx, "SELECT * FROM lance_vacuum('base', 'older_than=0s')").await;
    let e = error(
        &ctx,
        &format!("SELECT * FROM lance_permutation('{plan}', 'train')"),
    )
    .await;
    assert!(e.contains(&format!("permutation plan '{plan}'")), "{e}");
    assert!(
        e.contains(&format!("of its base '{base}' no longer exists")),
        "{e}"
    );
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
