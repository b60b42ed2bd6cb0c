//! Permutation plans that are not what they say: plans corrupted by hand
//! (types, ids, names, metadata, row ids, content) and a vacuumed base are
//! refused before any row is read, with errors naming the plan.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use lance::dataset::WriteMode;

use crate::fixtures::{params, write};
use crate::permutation::{error, ids, setup};
use crate::support::{dataset_path, ok, sql};

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
