//! Filters over `db://` tables with indexed columns. The service answers a
//! pushed filter with the scalar indices of the version it reads, so a
//! conjunct travels only where Lance's answer with those indices is
//! DataFusion's (the rule of local tables, `src/table/index_rules.rs`,
//! applied to the index list the service gives); the others are evaluated
//! here, and a DELETE, UPDATE or search prefilter that would depend on such
//! an index is refused before anything is sent.

use std::sync::Arc;

use datafusion::arrow::array::{FixedSizeListArray, Float32Array, Float64Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::prelude::SessionContext;
use lance::dataset::WriteMode;
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::scalar::{BuiltinIndexType, ScalarIndexParams};

use crate::cloud::{CORPUS, opened, physical, text};
use crate::fake_cloud::FakeCloud;
use crate::fixtures;
use crate::support::{ok, sql, try_rows};

/// The fake with the `indexed` fixture (BTREE on `s` and on the float `v`,
/// BITMAP on `b`, ZONEMAP on `id`, FM on `s2`): `here` opened locally,
/// `there` through the fake.
async fn setup() -> (FakeCloud, SessionContext) {
    let fake = FakeCloud::start().await;
    fixtures::indexed(&fake.table_path("indexed")).await;
    let ctx = opened(
        &fake,
        "indexed",
        ("here", "there"),
        "'read_rows_per_request' '300'",
    )
    .await;
    (fake, ctx)
}

/// Filters on every indexed column, each kind of predicate.
const INDEXED: &[&str] = &[
    "SELECT id FROM {t} WHERE s = 'Ab1' OR s IS NULL",
    "SELECT id FROM {t} WHERE s >= 'row-9' AND s < 'row-95'",
    "SELECT id, v FROM {t} WHERE v > 100.5",
    "SELECT id, v FROM {t} WHERE v BETWEEN -1.0 AND 1.0",
    "SELECT id FROM {t} WHERE s2 = 'Ab1' OR s2 LIKE 'row-1%'",
    "SELECT id FROM {t} WHERE b = true AND id IN (1, 2, 3, 4, 500)",
    "SELECT id FROM {t} WHERE NOT b AND id > 900",
    "SELECT count(*) FROM {t} WHERE v > 0.0 AND id < 500",
    "SELECT id FROM {t} WHERE v < 10.0 LIMIT 3000",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_over_indexed_columns_answer_as_the_table_opened_locally() {
    let (_fake, ctx) = setup().await;
    for query in CORPUS.iter().chain(INDEXED) {
        let local = try_rows(&ctx, &query.replace("{t}", "here")).await;
        let cloud = try_rows(&ctx, &query.replace("{t}", "there")).await;
        let local = local.unwrap_or_else(|e| panic!("{query} (local): {e}"));
        let cloud = cloud.unwrap_or_else(|e| panic!("{query} (db://): {e}"));
        assert_eq!(cloud, local, "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_filters_the_indices_answer_alike_travel() {
    let (fake, ctx) = setup().await;
    fake.clear_log();
    let plan = text(
        &physical(
            &ctx,
            "SELECT id FROM there WHERE v > 100.5 AND s = 'Ab1' AND s2 <> 'x' AND id < 500",
        )
        .await,
    );
    // A float column with an index, and an index type outside the audited
    // list (FM), stay here; the rest travels.
    assert!(
        plan.contains("FilterExec: v@1 > 100.5 AND s2@2 != x, projection=[id@0]")
            && plan.contains("filter=(`s` = 'Ab1') AND (`id` < 500)")
            && plan.contains("projection=[id, v, s2], filter="),
        "{plan}"
    );
    assert_eq!(
        fake.log(),
        vec!["describe_table", "list_table_indices", "count_table_rows"]
    );
    // A statement without filters asks for no index list.
    fake.clear_log();
    sql(&ctx, "SELECT count(*) FROM there").await.unwrap();
    assert_eq!(fake.log(), vec!["describe_table", "count_table_rows"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_an_index_would_answer_differently_is_refused() {
    let (fake, ctx) = setup().await;
    let before = try_rows(&ctx, "SELECT * FROM here").await.unwrap();
    for (statement, index) in [
        ("DELETE FROM there WHERE v > 100.5", "[v_idx]"),
        ("UPDATE there SET s = 'x' WHERE s2 = 'Ab1'", "[s2_idx]"),
    ] {
        fake.clear_log();
        let err = sql(&ctx, statement).await.unwrap_err().to_string();
        assert!(
            err.contains("from the table's index")
                && err.contains(index)
                && err.contains("whose semantics differ from DataFusion's"),
            "{statement}: {err}"
        );
        assert!(
            !fake
                .log()
                .iter()
                .any(|k| matches!(*k, "delete_from_table" | "update_table")),
            "{statement}: {:?}",
            fake.log()
        );
    }
    assert_eq!(try_rows(&ctx, "SELECT * FROM here").await.unwrap(), before);
    // Conditions the indices answer alike go.
    ok(&ctx, "DELETE FROM there WHERE s = 'Ab1' AND id < 500").await;
    assert_eq!(
        try_rows(&ctx, "SELECT count(*) FROM here WHERE s = 'Ab1'")
            .await
            .unwrap(),
        vec!["0"]
    );
}

/// 40 rows `(id, score DOUBLE, emb FLOAT[2])` with a BTREE index on `score`.
async fn scored(uri: &str) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("score", DataType::Float64, true),
        Field::new("emb", DataType::FixedSizeList(Arc::clone(&item), 2), true),
    ]));
    let values: Vec<f32> = (0..40)
        .flat_map(|i| [(i as f32).sin(), (i as f32).cos()])
        .collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from((0..40).collect::<Vec<i64>>())),
            Arc::new(Float64Array::from(
                (0..40).map(|i| f64::from(i) / 4.0).collect::<Vec<_>>(),
            )),
            Arc::new(
                FixedSizeListArray::try_new(item, 2, Arc::new(Float32Array::from(values)), None)
                    .unwrap(),
            ),
        ],
    )
    .unwrap();
    let mut ds = fixtures::write(uri, vec![batch], fixtures::params(WriteMode::Create, 1000)).await;
    ds.create_index(
        &["score"],
        IndexType::BTree,
        None,
        &ScalarIndexParams::for_builtin(BuiltinIndexType::BTree),
        true,
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_prefilter_an_index_would_answer_differently_is_refused() {
    let fake = FakeCloud::start().await;
    scored(&fake.table_path("scored")).await;
    let ctx = opened(&fake, "scored", ("here", "there"), "").await;
    let search = |t: &str, filter: &str| {
        format!(
            "SELECT id, _distance FROM lance_vector_search('{t}', 'emb', [0.5, 0.5], 5, \
             {filter})"
        )
    };
    fake.clear_log();
    let err = sql(&ctx, &search("there", "'filter=score > 2.0'"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the service would answer the prefilter '")
            && err.contains("[score_idx]")
            && err.contains("use 'prefilter=false'"),
        "{err}"
    );
    assert!(!fake.log().contains(&"query_table"), "{:?}", fake.log());
    // Filtering the k rows found is DataFusion's, and answers as locally;
    // a prefilter on an unindexed column travels.
    for filter in ["'filter=score > 2.0', 'prefilter=false'", "'filter=id > 3'"] {
        assert_eq!(
            try_rows(&ctx, &search("there", filter)).await.unwrap(),
            try_rows(&ctx, &search("here", filter)).await.unwrap(),
            "{filter}"
        );
    }
}
