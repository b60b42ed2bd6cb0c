//! Searches of `db://` tables run by the service: `lance_vector_search`,
//! `lance_fts` and `lance_hybrid_search` over the fake answer exactly what
//! they answer over the same table opened locally (rows, order, distances,
//! scores), in one `query` request per search (two for a hybrid one), and
//! their plans round-trip through both codecs.

use std::sync::Arc;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::physical_plan::collect;
use datafusion::prelude::SessionContext;
use datafusion_lance::{LanceLogicalCodec, LancePhysicalCodec};
use datafusion_proto::bytes::{
    logical_plan_to_bytes_with_extension_codec, physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};

use crate::cloud::{opened, physical, text};
use crate::fake_cloud::FakeCloud;
use crate::fixtures;
use crate::support::{context, private_cache, sql, try_rows};

/// The fake with table `docs` (the fixture), a context with it as `here` (opened locally) and as `cloud`.
async fn setup() -> (FakeCloud, SessionContext) {
    let fake = FakeCloud::start().await;
    fixtures::docs(&fake.table_path("docs")).await;
    let ctx = opened(&fake, "docs", ("here", "cloud"), "").await;
    (fake, ctx)
}

/// Searches whose answers (in order) must not depend on where the table is
/// read from.
const SEARCHES: &[&str] = &[
    "SELECT id, body, _distance FROM lance_vector_search('{t}', 'emb', [0.5, 0.5], 5)",
    "SELECT * FROM lance_vector_search('{t}', 'emb', [0.1, -0.9], 7, 'metric=cosine', \
     'filter=id < 30 AND body LIKE ''red%''')",
    "SELECT id, _distance FROM lance_vector_search('{t}', 'emb', [1, 0], 9, 'prefilter=false', \
     'filter=abs(id) > 20', 'use_index=false')",
    "SELECT id, _distance FROM lance_vector_search('{t}', 'emb', \
     (SELECT emb FROM {t} WHERE id = 17), 4, 'metric=dot')",
    "SELECT count(*) FROM lance_vector_search('{t}', 'emb', [0.5, 0.5], 6)",
    "SELECT id, _distance FROM lance_vector_search('{t}', 'emb', [0.5, 0.5], 100000) \
     WHERE id < 5",
    "SELECT id, _score FROM lance_fts('{t}', 'red fox')",
    "SELECT id, body, _score FROM lance_fts('{t}', 'whale tree', 'operator=and', 'limit=3', \
     'columns=body', 'filter=id >= 10')",
    "SELECT id, _score FROM lance_fts('{t}', 'whal gren', 'fuzziness=1')",
    "SELECT id, _score FROM lance_fts('{t}', 'blue whale', 'phrase=true')",
    "SELECT id, _distance, _score, _relevance FROM lance_hybrid_search('{t}', 'emb', \
     [0.5, 0.5], 'red fox', 8, 'metric=cosine', 'operator=and', 'filter=id < 50', 'rrf_k=10')",
    "SELECT _relevance, id, body FROM lance_hybrid_search('{t}', 'emb', [0.3, 0.7], 'whale', 5, \
     'columns=body')",
];

async fn answer(ctx: &SessionContext, statement: &str) -> String {
    let batches = sql(ctx, statement)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
    pretty_format_batches(&batches).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_answer_as_over_the_table_opened_locally() {
    let (_fake, ctx) = setup().await;
    for search in SEARCHES {
        let local = answer(&ctx, &search.replace("{t}", "here")).await;
        let cloud = answer(&ctx, &search.replace("{t}", "cloud")).await;
        assert!(
            local.lines().count() > 4,
            "{search}: finds nothing\n{local}"
        );
        assert_eq!(cloud, local, "{search}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_is_one_request_and_says_what_travels() {
    let (fake, ctx) = setup().await;
    for (statement, requests) in [
        // A prefilter first asks for the version's indices.
        (
            "SELECT id FROM lance_vector_search('cloud', 'emb', [0.5, 0.5], 3, 'filter=id > 4')",
            vec!["describe_table", "list_table_indices", "query_table"],
        ),
        (
            "SELECT id FROM lance_fts('cloud', 'red')",
            vec!["describe_table", "query_table"],
        ),
        (
            "SELECT id FROM lance_hybrid_search('cloud', 'emb', [0.5, 0.5], 'red', 3)",
            vec!["describe_table", "query_table", "query_table"],
        ),
        // A k beyond what the version holds is bounded by its row count first.
        (
            "SELECT id FROM lance_vector_search('cloud', 'emb', [0.5, 0.5], 1000000000000)",
            vec!["describe_table", "count_table_rows", "query_table"],
        ),
    ] {
        fake.clear_log();
        let rows = try_rows(&ctx, statement).await.unwrap();
        assert!(!rows.is_empty(), "{statement}");
        assert_eq!(fake.log(), requests, "{statement}");
    }
    let plan = physical(
        &ctx,
        "SELECT id, _distance FROM lance_vector_search('cloud', 'emb', [0.5, 0.5], 3, \
         'metric=cosine', 'nprobes=4', 'filter=body LIKE ''red%'' AND id > 4')",
    )
    .await;
    let shown = text(&plan);
    assert!(
        shown.contains(
            "CloudSearchExec: table=db://mydb/docs, version=2, projection=[id], nearest=emb, \
             k=3, dim=2, metric=cosine, nprobes=4, prefilter=((`body` LIKE 'red%') AND (`id` > 4))"
        ),
        "{shown}"
    );
    assert!(!shown.contains("sk-"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_service_cannot_answer_is_refused_before_any_request() {
    let (fake, ctx) = setup().await;
    fake.clear_log();
    for (statement, expected) in [
        (
            "SELECT * FROM lance_fts('cloud', 'red', 'fuzziness=auto')",
            "lance_fts: 'fuzziness=auto' on 'cloud': the service's query has no automatic \
             fuzziness",
        ),
        (
            "SELECT * FROM lance_vector_search('cloud', 'emb', [0.5, 0.5], 3, 'filter=abs(id) > 3')",
            "lance_vector_search: the service cannot prefilter on 'abs(id) > Int64(3)'",
        ),
        (
            "SELECT * FROM lance_fts('cloud', 'red', 'filter=abs(id) > 3')",
            "lance_fts: the service cannot prefilter on",
        ),
        (
            "SELECT * FROM lance_rows('cloud')",
            "lance_rows('cloud'): db://mydb/docs is a LanceDB table",
        ),
    ] {
        let e = try_rows(&ctx, statement).await.unwrap_err();
        assert!(e.contains(expected), "{statement}: {e}");
    }
    assert!(
        fake.log().iter().all(|k| *k == "describe_table"),
        "{:?}",
        fake.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_search_plans_round_trip_through_both_codecs() {
    let (_fake, ctx) = setup().await;
    let worker = context(1, &private_cache());
    for statement in [
        "SELECT id, _distance FROM lance_vector_search('cloud', 'emb', [0.5, 0.5], 4, \
         'filter=id < 40')",
        "SELECT id, _score FROM lance_fts('cloud', 'red fox', 'operator=and', 'fuzziness=1')",
        "SELECT id, _relevance FROM lance_hybrid_search('cloud', 'emb', [0.5, 0.5], 'whale', 6, \
         'rrf_k=5')",
    ] {
        let expected = answer(&ctx, statement).await;
        // Physical: the node carries the table, version, query and prefilter.
        let plan = physical(&ctx, statement).await;
        let codec = LancePhysicalCodec::new().with_storage_options_in_plan(true);
        let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &codec).unwrap();
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec)
                .unwrap();
        assert_eq!(text(&decoded), text(&plan));
        let out = collect(decoded, worker.task_ctx()).await.unwrap();
        assert_eq!(
            pretty_format_batches(&out).unwrap().to_string(),
            expected,
            "{statement}"
        );
        // Logical: the statement carries the db:// table.
        let logical = datafusion_lance::LanceSessionContextExt::lance_sql(&ctx, statement)
            .await
            .unwrap()
            .into_optimized_plan()
            .unwrap();
        let codec = LanceLogicalCodec::new().with_storage_options_in_plan(true);
        let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &codec).unwrap();
        let out = run_decoded_with_key(&worker, &bytes).await;
        assert_eq!(out, expected, "{statement}");
        // Without the key, the plan names no secret and the worker cannot
        // read the table with it.
        let bytes = logical_plan_to_bytes_with_extension_codec(&logical, &LanceLogicalCodec::new())
            .unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("sk-fake"));
    }
}

/// Runs a logical plan encoded with its storage options in `worker`.
async fn run_decoded_with_key(worker: &SessionContext, bytes: &[u8]) -> String {
    let codec = LanceLogicalCodec::new().with_storage_options_in_plan(true);
    let plan = datafusion_proto::bytes::logical_plan_from_bytes_with_extension_codec(
        bytes,
        &worker.task_ctx(),
        &codec,
    )
    .unwrap();
    let batches = worker
        .execute_logical_plan(plan)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}
