//! Helpers shared by the integration tests: contexts, row comparisons,
//! table states and files, and the fault injector ([`faults`]).

use crate::fixtures::numbers;

pub(crate) mod faults;
pub(crate) mod pty;

use std::sync::Arc;

use std::collections::BTreeSet;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::options::CacheBudgets;
use datafusion_lance::{LanceSessionCache, LanceSessionContextExt};
use futures::StreamExt;
use lance::dataset::builder::DatasetBuilder;
use lance_table::io::deletion::relative_deletion_file_path;

/// A context with Lance registered, `partitions` target partitions, and the
/// given Lance session cache.
pub(crate) fn context(partitions: usize, cache: &Arc<LanceSessionCache>) -> SessionContext {
    let ctx = datafusion_lance::lance_session_context(
        SessionConfig::new()
            .with_target_partitions(partitions)
            .with_information_schema(true),
    );
    ctx.with_lance_session_cache(Arc::clone(cache));
    ctx
}

/// A fresh private Lance session (tests stay independent of each other).
pub(crate) fn private_cache() -> Arc<LanceSessionCache> {
    LanceSessionCache::private(CacheBudgets::from_env())
}

/// Rows of `batches` as strings, sorted: a multiset for comparisons.
pub(crate) fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let formatters: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("formatter"))
            .collect();
        for row in 0..batch.num_rows() {
            rows.push(
                formatters
                    .iter()
                    .map(|f| f.value(row).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    rows.sort();
    rows
}

/// Runs `sql`: its rows as a sorted multiset, or the error text.
pub(crate) async fn try_rows(ctx: &SessionContext, sql: &str) -> Result<Vec<String>, String> {
    let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    let batches = df.collect().await.map_err(|e| e.to_string())?;
    Ok(sorted_rows(&batches))
}

/// Runs `sql` expecting one row of i64 values.
pub(crate) async fn ints(ctx: &SessionContext, sql: &str) -> Vec<i64> {
    let batches = ctx
        .sql(sql)
        .await
        .expect("plan")
        .collect()
        .await
        .expect("run");
    let batch = batches.iter().find(|b| b.num_rows() > 0).expect("one row");
    batch
        .columns()
        .iter()
        .map(|c| {
            let c = cast(c, &DataType::Int64).expect("cast");
            c.as_any()
                .downcast_ref::<Int64Array>()
                .expect("int64")
                .value(0)
        })
        .collect()
}

/// Runs `sql` to the end with DataFusion's `SessionContext::sql`, panicking
/// with the statement and the error if it fails.
pub(crate) async fn run(ctx: &SessionContext, sql: &str) {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A temp directory path for a dataset named `name`.
pub(crate) fn dataset_path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_string_lossy().to_string()
}

/// Lance's own consistency check of the latest version.
pub(crate) async fn validates(uri: &str) {
    let ds = DatasetBuilder::from_uri(uri).load().await.unwrap();
    ds.validate()
        .await
        .unwrap_or_else(|e| panic!("{uri} does not validate: {e}"));
}

/// Appends the `numbers` rows `start..start + n` to the dataset at `uri` the
/// way another process would: its own Lance session and runtime, on its own
/// thread. Blocks until committed, so it can run inside a store hook.
pub(crate) fn append_elsewhere(uri: &str, start: i64, n: usize) {
    write_elsewhere(uri, start, n, lance::dataset::WriteMode::Append)
}

/// Creates the dataset at `uri` with the `numbers` rows `start..start + n`
/// the way another process would (see [`append_elsewhere`]).
pub(crate) fn create_elsewhere(uri: &str, start: i64, n: usize) {
    write_elsewhere(uri, start, n, lance::dataset::WriteMode::Create)
}

fn write_elsewhere(uri: &str, start: i64, n: usize, mode: lance::dataset::WriteMode) {
    let uri = uri.to_string();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            crate::fixtures::write(
                &uri,
                vec![crate::fixtures::numbers_batch(start, n)],
                crate::fixtures::params(mode, 1000),
            )
            .await;
        });
    })
    .join()
    .expect("the other writer");
}

/// Outcome counts of a differential run (the same query against Lance and
/// against DataFusion over a `MemTable`).
#[derive(Debug, Default)]
pub(crate) struct Agreement {
    /// Queries run.
    pub(crate) queries: usize,
    /// Both sides returned the same rows, and they select something.
    pub(crate) same_rows: usize,
    /// Both sides returned the same empty (or all-zero count) result.
    pub(crate) same_empty: usize,
    /// Both sides failed: not a comparison.
    pub(crate) both_failed: usize,
}

impl Agreement {
    /// Compares one query's results; panics with `context` when they differ
    /// or only one side failed.
    pub(crate) fn record(
        &mut self,
        lance: Result<Vec<String>, String>,
        memory: Result<Vec<String>, String>,
        context: impl std::fmt::Display,
    ) {
        self.queries += 1;
        match (lance, memory) {
            (Ok(got), Ok(want)) => {
                assert!(
                    got == want,
                    "mismatch ({context}):\n  lance: {} rows {:?}\n  memory: {} rows {:?}",
                    got.len(),
                    got.iter().take(5).collect::<Vec<_>>(),
                    want.len(),
                    want.iter().take(5).collect::<Vec<_>>()
                );
                if selects_rows(&got) {
                    self.same_rows += 1;
                } else {
                    self.same_empty += 1;
                }
            }
            (Err(a), Err(b)) => {
                self.both_failed += 1;
                eprintln!("both sides failed ({context}): {a} / {b}");
            }
            (got, want) => panic!(
                "one side failed ({context}):\n  lance: {:?}\n  memory: {:?}",
                got.err(),
                want.err()
            ),
        }
    }

    /// The run compared something: at least 90% of the queries selected rows
    /// on both sides and at most 5% failed on both.
    pub(crate) fn assert_meaningful(&self, what: &str) {
        assert!(self.queries > 0, "{what}: no queries");
        assert!(
            self.same_rows * 10 >= self.queries * 9,
            "{what}: too few queries select rows: {self:?}"
        );
        assert!(
            self.both_failed * 20 <= self.queries,
            "{what}: too many queries fail: {self:?}"
        );
    }
}

/// True when a result selects something: a row that is not all zero counts.
pub(crate) fn selects_rows(rows: &[String]) -> bool {
    rows.iter().any(|r| r.split('|').any(|v| v != "0"))
}

/// Runs `sql` to completion (`MERGE INTO` included).
pub(crate) async fn sql(
    ctx: &SessionContext,
    sql: &str,
) -> datafusion::error::Result<Vec<RecordBatch>> {
    ctx.lance_sql(sql).await?.collect().await
}

/// Runs in `worker` a logical plan `bytes` encodes with the Lance logical
/// codec (as another process would receive it).
pub(crate) async fn run_decoded(
    worker: &SessionContext,
    bytes: &[u8],
) -> datafusion::error::Result<Vec<RecordBatch>> {
    let codec = datafusion_lance::LanceLogicalCodec::new();
    let plan = datafusion_proto::bytes::logical_plan_from_bytes_with_extension_codec(
        bytes,
        &worker.task_ctx(),
        &codec,
    )?;
    worker.execute_logical_plan(plan).await?.collect().await
}

/// Runs `statement`, panicking with its error.
pub(crate) async fn ok(ctx: &SessionContext, statement: &str) {
    sql(ctx, statement)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// (version, count, sum of ids, distinct ids) of table `t`.
pub(crate) async fn state(ctx: &SessionContext) -> Vec<i64> {
    let mut s = ints(ctx, "SELECT max(version) FROM lance_versions('t')").await;
    s.extend(
        ints(
            ctx,
            "SELECT count(*), coalesce(sum(id), 0), count(DISTINCT id) FROM t",
        )
        .await,
    );
    s
}

/// Every data file (`data/`) and deletion file (`_deletions/`) of the dataset
/// at `uri`.
pub(crate) async fn stored_files(uri: &str) -> BTreeSet<String> {
    let (store, base, _) = DatasetBuilder::from_uri(uri)
        .build_object_store()
        .await
        .unwrap();
    let mut files = BTreeSet::new();
    for dir in ["data", "_deletions"] {
        let listed: Vec<String> = store
            .inner
            .list(Some(&base.clone().join(dir)))
            .map(|m| format!("{dir}/{}", m.unwrap().location.filename().unwrap()))
            .collect()
            .await;
        files.extend(listed);
    }
    files
}

/// Data and deletion files referenced by the latest version.
pub(crate) async fn referenced_files(uri: &str) -> BTreeSet<String> {
    let ds = DatasetBuilder::from_uri(uri).load().await.unwrap();
    let mut files = BTreeSet::new();
    for f in ds.fragments().iter() {
        files.extend(f.files.iter().map(|d| format!("data/{}", d.path)));
        if let Some(deletion) = &f.deletion_file {
            files.insert(relative_deletion_file_path(f.id, deletion));
        }
    }
    files
}

/// Every file under `<uri>/data` (any object store Lance can open).
pub(crate) async fn data_files(uri: &str) -> BTreeSet<String> {
    let (store, base, _) = DatasetBuilder::from_uri(uri)
        .build_object_store()
        .await
        .unwrap();
    let prefix = base.join("data");
    store
        .inner
        .list(Some(&prefix))
        .map(|meta| meta.unwrap().location.to_string())
        .collect()
        .await
}

/// `statement` planned (not run) in a fresh context on `t` at `uri`: it has
/// read the table's current version. Run it with `collect(plan, task)`.
pub(crate) async fn planned(
    cache: &Arc<LanceSessionCache>,
    uri: &str,
    statement: &str,
) -> (
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    Arc<datafusion::execution::TaskContext>,
) {
    let ctx = context(2, cache);
    sql(
        &ctx,
        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
    )
    .await
    .unwrap();
    let plan = ctx
        .sql(statement)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    (plan, ctx.task_ctx())
}

pub(crate) async fn version(ctx: &SessionContext, table: &str) -> i64 {
    ints(
        ctx,
        &format!("SELECT max(version) FROM lance_versions('{table}')"),
    )
    .await[0]
}

/// A table `t (id BIGINT NOT NULL, label VARCHAR)` holding the 94 ids of
/// `numbers` below 100, and the `numbers` fixture registered as `src`.
pub(crate) async fn setup(dir: &tempfile::TempDir, ctx: &SessionContext) -> String {
    setup_at(dir, ctx, &dataset_path(dir, "t.lance")).await
}

pub(crate) const INITIAL: i64 = 94;

pub(crate) async fn setup_at(dir: &tempfile::TempDir, ctx: &SessionContext, uri: &str) -> String {
    let uri = uri.to_string();
    let src = dataset_path(dir, "numbers.lance");
    numbers(&src).await;
    sql(
        ctx,
        &format!("CREATE EXTERNAL TABLE src STORED AS LANCE LOCATION '{src}'"),
    )
    .await
    .unwrap();
    sql(
        ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, label VARCHAR) STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await
    .unwrap();
    sql(ctx, "INSERT INTO t SELECT id, s FROM src WHERE id < 100")
        .await
        .unwrap();
    uri
}

/// The table is exactly as before: version, rows, and files on disk.
pub(crate) async fn assert_unchanged(
    ctx: &SessionContext,
    uri: &str,
    before: (i64, Vec<i64>, BTreeSet<String>),
) {
    assert_eq!(version(ctx, "t").await, before.0, "no new version");
    assert_eq!(
        ints(ctx, "SELECT count(*), sum(id) FROM t").await,
        before.1,
        "content unchanged"
    );
    assert_eq!(data_files(uri).await, before.2, "no data file left behind");
}

pub(crate) async fn snapshot(ctx: &SessionContext, uri: &str) -> (i64, Vec<i64>, BTreeSet<String>) {
    (
        version(ctx, "t").await,
        ints(ctx, "SELECT count(*), sum(id) FROM t").await,
        data_files(uri).await,
    )
}

pub(crate) fn ints_of(batches: &[RecordBatch]) -> i64 {
    let c = cast(batches[0].column(0), &DataType::Int64).unwrap();
    c.as_any().downcast_ref::<Int64Array>().unwrap().value(0)
}

/// Every file under the dataset directory (manifests, transactions, data).
pub(crate) fn all_files(dir: &std::path::Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.display().to_string());
            }
        }
    }
    files
}

pub(crate) fn nightly() -> bool {
    std::env::var("DATAFUSION_LANCE_NIGHTLY").is_ok_and(|v| v == "1")
}
