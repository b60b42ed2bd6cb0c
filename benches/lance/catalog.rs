//! **catalog** — a Lance directory namespace of 1,000 tables: attach it,
//! list its tables and query one, as a new process does (a fresh Lance
//! session), vs Lance's own namespace API (list, describe, open, scan).

use arrow::array::{Array, Int64Array};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::options::CacheBudgets;
use datafusion_lance::{LanceSessionCache, LanceSessionContextExt};
use futures::TryStreamExt;
use lance::Dataset;
use lance_namespace::LanceNamespace;
use lance_namespace::models::{DescribeTableRequest, ListTablesRequest};
use lance_namespace_impls::DirectoryNamespaceBuilder;

use crate::common::{Args, interleaved, ratio, side};

const TABLES: usize = 1_000;
const QUERIED: &str = "t0500";

fn fresh_context() -> SessionContext {
    let ctx =
        datafusion_lance::lance_session_context(SessionConfig::new().with_information_schema(true));
    ctx.with_lance_session_cache(LanceSessionCache::private(CacheBudgets::from_env()));
    ctx
}

async fn ours(root: &str) -> i64 {
    let ctx = fresh_context();
    datafusion_lance::register_lance_catalog(&ctx, "lake", root, Default::default())
        .await
        .expect("attach");
    let listed = ctx
        .lance_sql(
            "SELECT count(*) FROM information_schema.tables \
             WHERE table_catalog = 'lake' AND table_schema = 'public'",
        )
        .await
        .expect("list")
        .collect()
        .await
        .expect("list");
    let listed = int(listed[0].column(0).as_ref());
    assert_eq!(listed, TABLES as i64);
    let sum = ctx
        .lance_sql(&format!("SELECT sum(v) FROM lake.public.{QUERIED}"))
        .await
        .expect("query")
        .collect()
        .await
        .expect("query");
    int(sum[0].column(0).as_ref())
}

async fn lance_own(root: &str) -> i64 {
    let ns = DirectoryNamespaceBuilder::new(root)
        .build()
        .await
        .expect("namespace");
    let mut names = Vec::new();
    let mut page_token = None;
    loop {
        let page = ns
            .list_tables(ListTablesRequest {
                id: Some(vec![]),
                page_token: page_token.take(),
                ..Default::default()
            })
            .await
            .expect("list");
        names.extend(page.tables);
        match page.page_token {
            Some(token) if !token.is_empty() => page_token = Some(token),
            _ => break,
        }
    }
    assert_eq!(names.len(), TABLES);
    let location = ns
        .describe_table(DescribeTableRequest {
            id: Some(vec![QUERIED.to_string()]),
            ..Default::default()
        })
        .await
        .expect("describe")
        .location
        .expect("location");
    let dataset = Dataset::open(&location).await.expect("open");
    let mut scan = dataset.scan();
    scan.project(&["v"]).expect("project");
    let batches: Vec<_> = scan
        .try_into_stream()
        .await
        .expect("scan")
        .try_collect()
        .await
        .expect("scan");
    batches
        .iter()
        .map(|b| {
            let v = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            v.iter().flatten().sum::<i64>()
        })
        .sum()
}

fn int(column: &dyn Array) -> i64 {
    column
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an Int64 column")
        .value(0)
}

/// Creates the namespace once (kept under the bench data directory).
async fn namespace(args: &Args) -> String {
    let root = args.dir.join(format!("namespace-{TABLES}"));
    let done = root.join(format!("t{:04}.lance", TABLES - 1));
    let root_str = root.to_string_lossy().to_string();
    if done.is_dir() {
        return root_str;
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("namespace root");
    let ctx = fresh_context();
    datafusion_lance::register_lance_catalog(&ctx, "lake", &root_str, Default::default())
        .await
        .expect("attach");
    for i in 0..TABLES {
        ctx.lance_sql(&format!(
            "CREATE TABLE lake.public.t{i:04} AS SELECT value AS id, value * {i} AS v \
             FROM generate_series(1, 100)"
        ))
        .await
        .expect("create")
        .collect()
        .await
        .expect("create");
    }
    root_str
}

pub(crate) async fn catalog_table(args: &Args) {
    let root = namespace(args).await;
    println!(
        "\n## A namespace of {TABLES} tables: attach, list, query one\n\n\
         Each run starts a new context with a fresh Lance session (as a new process would), \
         attaches the directory namespace, counts its tables through \
         `information_schema.tables` and sums a column of `{QUERIED}` (100 rows). Lance's own: \
         `DirectoryNamespace` list_tables (every page), describe_table, `Dataset::open`, a scan \
         of the column. Median of {} interleaved runs (min–max) / cores.\n",
        args.iters
    );
    let expected = 5050 * 500;
    let stats = interleaved(
        args.iters,
        &mut [
            side(|| {
                let root = root.clone();
                async move { assert_eq!(ours(&root).await, expected) }
            }),
            side(|| {
                let root = root.clone();
                async move { assert_eq!(lance_own(&root).await, expected) }
            }),
        ],
    )
    .await;
    println!("| tables | ours: attach + list + query | Lance namespace API | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| {TABLES} | {} | {} | {} |",
        stats[0].cell(),
        stats[1].cell(),
        ratio(&stats[0], &stats[1])
    );
}
