//! Plans as data: every Lance physical node and every provider the crate
//! creates round-trips through the codecs, keeping every field, and the
//! decoded plan — run in another context with its own Lance session and no
//! tables registered (in this process: process-wide registries such as the
//! merge locks are shared) — shows the same `EXPLAIN` and gives the same
//! rows as the original statement run on a twin table.

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::datasource::sink::DataSinkExec;
use datafusion::logical_expr::LogicalPlan;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_expr::{LexRequirement, PhysicalSortRequirement};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::expressions::Column;
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::SessionContext;
use datafusion_lance::options::{MergeOptions, MergeOutput};
use datafusion_lance::physical_plan::{
    CommitKind, GroupRows, IndexChange, LanceCommitExec, LanceDeleteExec, LanceIndexExec,
    LanceMergeExec, LanceOptimizeExec, LanceScanExec, LanceSink, LanceTagExec, LanceUpdateExec,
    LanceVacuumExec, LanceWriteExec, OptimizeOptions, ScanOptions, ScanParts, TagChange,
    VacuumOptions, WriteTarget,
};
use datafusion_lance::storage::{Snapshot, TableLocation};
use datafusion_lance::{
    LanceLogicalCodec, LancePhysicalCodec, LanceSessionContextExt, LanceTableProvider,
    resolve_lance_tables,
};
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use tempfile::TempDir;

use crate::fixtures;
use crate::support::{context, dataset_path, ints, private_cache, run_decoded, sorted_rows, sql};

/// Two identical tables `a` and `b` (and `pa`/`pb` with a primary key),
/// registered on `origin`; `worker` has its own Lance session and no tables.
struct Twins {
    dir: TempDir,
    origin: SessionContext,
    worker: SessionContext,
}

async fn twins() -> Twins {
    let dir = tempfile::tempdir().unwrap();
    let origin = context(2, &private_cache());
    for name in ["a", "b"] {
        let uri = dataset_path(&dir, &format!("{name}.lance"));
        fixtures::numbers(&uri).await;
        sql(
            &origin,
            &format!("CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}'"),
        )
        .await
        .unwrap();
        let keyed = dataset_path(&dir, &format!("p{name}.lance"));
        for statement in [
            format!(
                "CREATE EXTERNAL TABLE p{name} (id BIGINT NOT NULL, s VARCHAR, PRIMARY KEY (id)) \
                 STORED AS LANCE LOCATION '{keyed}'"
            ),
            format!("INSERT INTO p{name} SELECT id, s FROM {name} WHERE id < 50"),
        ] {
            sql(&origin, &statement).await.unwrap();
        }
    }
    Twins {
        dir,
        origin,
        worker: context(2, &private_cache()),
    }
}

impl Twins {
    /// `statement` for table `a` (`{t}` → `a`, `{p}` → `pa`) or `b`.
    fn for_table(&self, statement: &str, twin: &str) -> String {
        statement
            .replace("{t}", twin)
            .replace("{p}", &format!("p{twin}"))
            .replace("{dir}", self.dir.path().to_str().unwrap())
    }

    /// Runs `statement` on `b` in the origin context.
    async fn run_on_b(&self, statement: &str) -> Vec<String> {
        let batches = sql(&self.origin, &self.for_table(statement, "b"))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        sorted_rows(&batches)
    }

    /// The twins hold the same rows at the same version.
    async fn assert_alike(&self, statement: &str) {
        for (a, b) in [("a", "b"), ("pa", "pb")] {
            let rows = |t: &str| format!("SELECT * FROM {t}");
            let version = |t: &str| format!("SELECT max(version) FROM lance_versions('{t}')");
            assert_eq!(
                sorted_rows(&sql(&self.origin, &rows(a)).await.unwrap()),
                sorted_rows(&sql(&self.origin, &rows(b)).await.unwrap()),
                "after {statement}: rows of {a} and {b}"
            );
            assert_eq!(
                ints(&self.origin, &version(a)).await,
                ints(&self.origin, &version(b)).await,
                "after {statement}: versions of {a} and {b}"
            );
        }
    }
}

fn explain(plan: &Arc<dyn ExecutionPlan>) -> String {
    displayable(plan.as_ref()).indent(true).to_string()
}

/// Encodes `plan`, decodes it in `worker`; the EXPLAIN must not change.
pub(crate) fn ship_physical(
    plan: &Arc<dyn ExecutionPlan>,
    worker: &SessionContext,
) -> Arc<dyn ExecutionPlan> {
    let codec = LancePhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(plan), &codec).unwrap();
    let decoded =
        physical_plan_from_bytes_with_extension_codec(&bytes, &worker.task_ctx(), &codec).unwrap();
    assert_eq!(explain(&decoded), explain(plan));
    decoded
}

/// Plans `statement` on `a`, ships the physical plan to the worker and runs
/// it there; runs `statement` on `b` in the origin; both must agree.
async fn physical_twin(t: &Twins, statement: &str) -> Vec<String> {
    let plan = t
        .origin
        .lance_sql(&t.for_table(statement, "a"))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let decoded = ship_physical(&plan, &t.worker);
    let got = sorted_rows(&collect(decoded, t.worker.task_ctx()).await.unwrap());
    assert_eq!(got, t.run_on_b(statement).await, "{statement}");
    t.assert_alike(statement).await;
    got
}

/// The statements every codec test runs, in order; each changes the twins.
const STATEMENTS: &[&str] = &[
    "SELECT id, s FROM {t} WHERE id > 500 AND s LIKE 'Ab%'",
    "SELECT id, v FROM {t} LIMIT 7",
    "SELECT count(x.s), min(y.v) FROM {t} x JOIN {t} y ON x.id = y.id + 1",
    "INSERT INTO {t} SELECT id + 1000, v, s, b, d FROM {t} WHERE id < 20",
    "DELETE FROM {t} WHERE id IN (SELECT id + 1 FROM {t} WHERE id % 9 = 0)",
    "UPDATE {t} SET s = concat(s, '!'), v = v * 2 WHERE id BETWEEN 100 AND 140",
    "SELECT id, s FROM {t} VERSION AS OF 1 EXCEPT SELECT id, s FROM {t}",
    "SELECT count(*), sum(id) FROM lance_as_of('{t}', 2) AS o WHERE o.id > 10",
    "SELECT * FROM lance_merge('{p}', (SELECT id, 'merged' AS s FROM {t} WHERE id BETWEEN 40 AND 60), \
     'id', 'when_matched_if=target.s IS NOT NULL')",
    "INSERT OR REPLACE INTO {p} SELECT id, 'replaced' FROM {t} WHERE id BETWEEN 55 AND 70",
    "MERGE INTO {p} AS tg USING (SELECT id, s FROM {t} WHERE id BETWEEN 65 AND 80) AS src \
     ON tg.id = src.id \
     WHEN MATCHED AND tg.s <> 'tg.x' THEN UPDATE SET s = src.s \
     WHEN NOT MATCHED THEN INSERT (id, s) VALUES (src.id, src.s) \
     WHEN NOT MATCHED BY SOURCE AND tg.id < 3 THEN DELETE",
    "INSERT OVERWRITE {t} SELECT * FROM {t} WHERE id % 2 = 0",
    "SELECT * FROM lance_merge('{t}', (SELECT id, v * 2 AS v FROM {t} WHERE id < 40), 'id')",
    // UPDATE and INSERT writing different columns: the source joined with
    // the table at the statement's version.
    "MERGE INTO {t} AS tg USING (SELECT id * 7 AS id, v + 1 AS v, s, b, d FROM {t} \
     WHERE id BETWEEN 130 AND 160) AS src ON tg.id = src.id \
     WHEN MATCHED THEN UPDATE SET v = src.v WHEN NOT MATCHED THEN INSERT *",
    "COPY (SELECT id, s FROM {t} WHERE id < 100) TO '{dir}/copy_{t}.lance' STORED AS LANCE \
     OPTIONS ('lance.max_rows_per_file' '7', 'lance.data_storage_version' '2.0')",
    "SELECT version, operation, fragments, rows FROM lance_versions('{t}')",
    // Fragment ids depend on which writer finished first: totals only.
    "SELECT count(*), sum(physical_rows), sum(deleted_rows), sum(rows), sum(data_files) \
     FROM lance_fragments('{t}')",
    "SELECT count(*), count(DISTINCT _rowid), count(DISTINCT _rowaddr), max(_rowaddr) >= 0 \
     FROM lance_rows('{t}') WHERE id < 500",
    "SELECT * FROM lance_tag('{t}', 'create', 'codec', 2)",
    "SELECT * FROM lance_tag('{t}', 'update', 'codec')",
    "SELECT tag, version FROM lance_tags('{t}')",
    "SELECT * FROM lance_tag('{t}', 'delete', 'codec')",
    "CREATE INDEX codec_idx ON {t} USING BTREE (id)",
    "SELECT * FROM lance_create_index('{t}', 'codec_zone', 'v', 'zonemap')",
    "SELECT name, columns, type, indexed_fragments, unindexed_rows FROM lance_indices('{t}')",
    "DROP INDEX codec_idx ON {t}",
    "SELECT * FROM lance_drop_index('{t}', 'codec_zone')",
    "SELECT fragments_added, indices_optimized FROM lance_optimize('{t}', 'indices=false')",
    "SELECT versions_removed, files_removed, orphans_removed FROM lance_vacuum('{t}', 'older_than=0s')",
    "TRUNCATE {t}",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_physical_node_runs_the_same_after_a_round_trip() {
    let t = twins().await;
    for statement in STATEMENTS {
        physical_twin(&t, statement).await;
    }
    // The copies are alike too.
    let copy = |x: &str| format!("SELECT * FROM '{}/copy_{x}.lance'", t.dir.path().display());
    let ctx = datafusion_lance::lance_session_context(Default::default());
    let ctx = datafusion_lance::catalogs::enable_lance_url_tables(ctx);
    assert_eq!(
        sorted_rows(&ctx.sql(&copy("a")).await.unwrap().collect().await.unwrap()),
        sorted_rows(&ctx.sql(&copy("b")).await.unwrap().collect().await.unwrap()),
    );
}

/// Plans `statement` on `a` logically, resolves it (`resolve` = what the
/// query planner does before physical planning), ships it to the worker,
/// which plans and runs it; runs `statement` on `b` in the origin.
async fn logical_twin(t: &Twins, statement: &str, resolve: bool) {
    let state = t.origin.state();
    let plan = t
        .origin
        .lance_sql(&t.for_table(statement, "a"))
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let mut plan = state.optimize(&plan).unwrap();
    if resolve {
        plan = resolve_lance_tables(plan, &state).await.unwrap();
    }
    let codec = LanceLogicalCodec::new();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let decoded: LogicalPlan =
        logical_plan_from_bytes_with_extension_codec(&bytes, &t.worker.task_ctx(), &codec).unwrap();
    let original = state.create_physical_plan(&plan).await.unwrap();
    let shipped = t
        .worker
        .state()
        .create_physical_plan(&decoded)
        .await
        .unwrap();
    assert_eq!(explain(&shipped), explain(&original), "{statement}");
    let got = sorted_rows(&collect(shipped, t.worker.task_ctx()).await.unwrap());
    assert_eq!(got, t.run_on_b(statement).await, "{statement}");
    t.assert_alike(statement).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_plans_the_same_after_a_round_trip() {
    let t = twins().await;
    for statement in STATEMENTS {
        logical_twin(&t, statement, true).await;
    }
}

/// Unresolved plans carry tables (not versions): the worker reads the
/// latest version; table functions and `lance_merge` name their tables, and
/// the worker must know those names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolved_plans_read_the_latest_version_on_the_worker() {
    let t = twins().await;
    logical_twin(&t, "SELECT count(*), sum(id) FROM {t} WHERE id > 10", false).await;
    logical_twin(&t, "DELETE FROM {t} WHERE id < 30", false).await;

    // Encoded before a commit, run after it: the worker reads the new version.
    let codec = LanceLogicalCodec::new();
    let query = "SELECT count(*) FROM a";
    let plan = t.origin.sql(query).await.unwrap().logical_plan().clone();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    sql(
        &t.origin,
        "INSERT INTO a SELECT id + 5000, v, s, b, d FROM a",
    )
    .await
    .unwrap();
    let rows = run_decoded(&t.worker, &bytes).await.unwrap();
    let now = ints(&t.origin, query).await;
    assert_eq!(sorted_rows(&rows), vec![now[0].to_string()]);

    // A COPY's options travel only in a resolved plan: an unresolved one is
    // refused rather than losing them.
    let copy = t
        .origin
        .sql(&format!(
            "COPY (SELECT 1 AS id) TO '{}/unresolved.lance' STORED AS LANCE \
             OPTIONS ('lance.max_rows_per_file' '7')",
            t.dir.path().display()
        ))
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let error = logical_plan_to_bytes_with_extension_codec(&copy, &codec)
        .unwrap_err()
        .to_string();
    assert!(error.contains("resolve_lance_tables"), "{error}");
    let plan = t
        .origin
        .sql("SELECT * FROM lance_versions('a')")
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let error = run_decoded(&t.worker, &bytes)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("'a' is neither a Lance table nor a Lance dataset location"),
        "{error}"
    );
    // The cache statistics are those of the session that plans the query.
    let stats = "SELECT cache, entries FROM lance_cache_stats()";
    let plan = t.origin.sql(stats).await.unwrap().logical_plan().clone();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let rows = run_decoded(&t.worker, &bytes).await.unwrap();
    let on_worker = sorted_rows(&sql(&t.worker, stats).await.unwrap());
    let on_origin = sorted_rows(&sql(&t.origin, stats).await.unwrap());
    assert_eq!(sorted_rows(&rows), on_worker);
    assert_ne!(
        on_worker, on_origin,
        "the two sessions' statistics should differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_table_stays_pinned_after_a_round_trip() {
    let t = twins().await;
    let uri = dataset_path(&t.dir, "a.lance");
    sql(
        &t.origin,
        &format!(
            "CREATE EXTERNAL TABLE a1 STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.version' '1')"
        ),
    )
    .await
    .unwrap();
    sql(&t.origin, "DELETE FROM a WHERE id < 500")
        .await
        .unwrap();
    let plan = t
        .origin
        .sql("SELECT count(*) FROM a1")
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let codec = LanceLogicalCodec::new();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let rows = run_decoded(&t.worker, &bytes).await.unwrap();
    // Version 1 holds all 1000 rows (the fixture's delete made version 2).
    assert_eq!(sorted_rows(&rows), vec!["1000"]);
}

/// `LanceSink` inside `DataSinkExec`: one version, and the same after a
/// round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_sink_writes_one_version_and_round_trips() {
    let t = twins().await;
    let state = t.origin.state();
    let mut versions = Vec::new();
    for twin in ["a", "b"] {
        let provider = LanceTableProvider::builder(dataset_path(&t.dir, &format!("{twin}.lance")))
            .build()
            .await
            .unwrap();
        let sink = provider.data_sink(&state, InsertOp::Append).await.unwrap();
        let input = t
            .origin
            .sql(&format!(
                "SELECT id + 5000 AS id, v, s, b, d FROM {twin} WHERE id < 300"
            ))
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        // DataSinkExec writes one input partition (the optimizer would
        // coalesce them).
        let input = Arc::new(CoalescePartitionsExec::new(input));
        let plan: Arc<dyn ExecutionPlan> = Arc::new(DataSinkExec::new(input, Arc::new(sink), None));
        assert!(
            explain(&plan).contains("LanceSink: uri="),
            "{}",
            explain(&plan)
        );
        let rows = if twin == "a" {
            let decoded = ship_physical(&plan, &t.worker);
            collect(decoded, t.worker.task_ctx()).await.unwrap()
        } else {
            collect(plan, t.origin.task_ctx()).await.unwrap()
        };
        assert_eq!(sorted_rows(&rows), vec!["282"]);
        versions.push(
            ints(
                &t.origin,
                &format!("SELECT max(version) FROM lance_versions('{twin}')"),
            )
            .await,
        );
    }
    // numbers is at version 2; the sink made exactly one more.
    assert_eq!(versions, vec![vec![3], vec![3]]);
    t.assert_alike("the data sink").await;
    let error = LanceTableProvider::builder(dataset_path(&t.dir, "pa.lance"))
        .build()
        .await
        .unwrap()
        .data_sink(&state, InsertOp::Replace)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("cannot upsert"), "{error}");
}

fn scan_with(fragments: usize, storage_options: &[(&str, &str)]) -> Arc<dyn ExecutionPlan> {
    let schema = fixtures::numbers_schema();
    let per_group = fragments.div_ceil(4);
    let ids: Vec<u64> = (0..fragments as u64).collect();
    let groups: Vec<Vec<u64>> = ids.chunks(per_group).map(<[u64]>::to_vec).collect();
    Arc::new(LanceScanExec::from_parts(ScanParts {
        location: TableLocation::new(
            "s3://bucket/tables/t.lance",
            storage_options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        snapshot: Snapshot {
            version: 42,
            e_tag: Some("\"0123456789abcdef\"".into()),
        },
        group_rows: groups
            .iter()
            .map(|g| GroupRows {
                rows: g.len() * 1000,
                exact: true,
            })
            .collect(),
        groups,
        columns: vec!["id".into(), "s".into()],
        schema,
        filter: None,
        limit: None,
        options: ScanOptions {
            batch_size: 8192,
            ..Default::default()
        },
    }))
}

fn encoded_len(plan: Arc<dyn ExecutionPlan>) -> usize {
    physical_plan_to_bytes_with_extension_codec(plan, &LancePhysicalCodec::new())
        .unwrap()
        .len()
}

/// A scan's bytes grow by about two bytes per fragment id (below 16,384):
/// its fragment lists are the only part that grows. (`make bench`'s `plans`
/// section measures real tables next to their manifests.)
#[test]
fn an_encoded_scan_costs_two_bytes_per_fragment_id() {
    let small = encoded_len(scan_with(10, &[]));
    let large = encoded_len(scan_with(10_000, &[]));
    let per_fragment = (large - small) as f64 / 9_990.0;
    assert!(
        per_fragment <= 2.01,
        "{small} bytes for 10 fragments, {large} for 10,000: {per_fragment:.2} per fragment"
    );
}

/// Storage options (credentials) stay out of encoded plans unless the
/// encoder is told to carry them; a worker can supply its own; neither
/// EXPLAIN nor Debug ever shows them.
#[test]
fn credentials_travel_only_when_asked() {
    let plan = scan_with(3, &[("aws_secret_access_key", "top-secret-value")]);
    let contains = |bytes: &[u8]| {
        bytes
            .windows("top-secret-value".len())
            .any(|w| w == b"top-secret-value")
    };
    let worker = context(1, &private_cache());
    let decode = |bytes: &[u8], codec: &LancePhysicalCodec| {
        let plan = physical_plan_from_bytes_with_extension_codec(bytes, &worker.task_ctx(), codec)
            .unwrap();
        let shown = format!("{} {plan:?}", explain(&plan));
        assert!(!shown.contains("top-secret-value"), "{shown}");
        plan.downcast_ref::<LanceScanExec>()
            .unwrap()
            .parts()
            .location
            .storage_options
    };

    let default = LancePhysicalCodec::new();
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &default).unwrap();
    assert!(!contains(&bytes));
    assert!(decode(&bytes, &default).is_empty());
    let worker_codec = LancePhysicalCodec::new().with_default_storage_options([(
        "aws_secret_access_key".to_string(),
        "worker-key".to_string(),
    )]);
    assert_eq!(
        decode(&bytes, &worker_codec)["aws_secret_access_key"],
        "worker-key"
    );

    let carrying = LancePhysicalCodec::new().with_storage_options_in_plan(true);
    let bytes = physical_plan_to_bytes_with_extension_codec(plan, &carrying).unwrap();
    assert!(contains(&bytes));
    assert_eq!(
        decode(&bytes, &default)["aws_secret_access_key"],
        "top-secret-value"
    );
    assert!(!format!("{carrying:?} {worker_codec:?}").contains("worker-key"));
}

/// Bytes that are not a Lance plan fail with an error, never a panic.
#[test]
fn malformed_bytes_fail_cleanly() {
    use datafusion_proto::physical_plan::PhysicalExtensionCodec;
    let worker = context(1, &private_cache());
    let codec = LancePhysicalCodec::new();
    for bytes in [&b"\xff\xff\xff"[..], &b"\x08\x07"[..], &[][..]] {
        let error = codec
            .try_decode(bytes, &[], &worker.task_ctx())
            .unwrap_err()
            .to_string();
        assert!(error.contains("Lance plan"), "{bytes:?} gave {error}");
    }
}

/// Everything a Lance node carries, for comparing a node with its decoded
/// copy field by field (EXPLAIN shows only some fields).
#[derive(Debug, PartialEq)]
enum NodeData {
    Scan(ScanParts),
    Write(WriteTarget),
    Commit(WriteTarget, CommitKind),
    Delete(WriteTarget),
    Update(WriteTarget),
    Merge(WriteTarget, Vec<String>, MergeOptions, MergeOutput),
    Vacuum(TableLocation, VacuumOptions),
    Tag(TableLocation, TagChange),
    Optimize(TableLocation, OptimizeOptions),
    Index(TableLocation, IndexChange),
    Sink(WriteTarget, CommitKind, Option<LexRequirement>),
}

fn node_data(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<NodeData>) {
    let node = plan.as_ref();
    if let Some(n) = node.downcast_ref::<LanceScanExec>() {
        out.push(NodeData::Scan(n.parts()));
    } else if let Some(n) = node.downcast_ref::<LanceWriteExec>() {
        out.push(NodeData::Write(WriteTarget::clone(n.target())));
    } else if let Some(n) = node.downcast_ref::<LanceCommitExec>() {
        out.push(NodeData::Commit(WriteTarget::clone(n.target()), n.kind()));
    } else if let Some(n) = node.downcast_ref::<LanceDeleteExec>() {
        out.push(NodeData::Delete(WriteTarget::clone(n.target())));
    } else if let Some(n) = node.downcast_ref::<LanceUpdateExec>() {
        out.push(NodeData::Update(WriteTarget::clone(n.target())));
    } else if let Some(n) = node.downcast_ref::<LanceMergeExec>() {
        out.push(NodeData::Merge(
            WriteTarget::clone(n.target()),
            n.keys().to_vec(),
            n.options().clone(),
            n.output(),
        ));
    } else if let Some(n) = node.downcast_ref::<LanceVacuumExec>() {
        out.push(NodeData::Vacuum(n.location().clone(), *n.work()));
    } else if let Some(n) = node.downcast_ref::<LanceOptimizeExec>() {
        out.push(NodeData::Optimize(n.location().clone(), *n.work()));
    } else if let Some(n) = node.downcast_ref::<LanceIndexExec>() {
        out.push(NodeData::Index(n.location().clone(), n.work().clone()));
    } else if let Some(n) = node.downcast_ref::<LanceTagExec>() {
        out.push(NodeData::Tag(n.location().clone(), n.work().clone()));
    } else if let Some(n) = node.downcast_ref::<DataSinkExec>()
        && let Some(sink) = n.sink().downcast_ref::<LanceSink>()
    {
        out.push(NodeData::Sink(
            WriteTarget::clone(sink.target()),
            sink.kind(),
            n.sort_order().clone(),
        ));
    }
    for child in plan.children() {
        node_data(child, out);
    }
}

/// Every field of every node kind survives a round trip, with every setting
/// and option away from its default (EXPLAIN would not show most of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_field_of_every_node_survives_a_round_trip() {
    let t = twins().await;
    for setting in [
        "SET lance.batch_size = 777",
        "SET lance.fragment_readahead = 3",
        "SET lance.batch_readahead = 5",
        "SET lance.io_buffer_size = 123456",
        "SET lance.use_scalar_index = false",
        "SET lance.pushdown_filters = true",
        "SET lance.max_rows_per_file = 99",
        "SET lance.max_rows_per_group = 77",
        "SET lance.data_storage_version = '2.2'",
        "SET lance.commit_max_retries = 7",
        "SET lance.commit_retry_timeout_ms = 1234",
    ] {
        sql(&t.origin, setting).await.unwrap();
    }
    let statements = [
        "SELECT id, s FROM a WHERE id > 500 AND s LIKE 'Ab%' LIMIT 9",
        "INSERT INTO a SELECT id + 1000, v, s, b, d FROM a WHERE id < 20",
        "INSERT OVERWRITE a SELECT * FROM a",
        "TRUNCATE a",
        "DELETE FROM a WHERE id IN (SELECT id FROM a WHERE id % 9 = 0)",
        "UPDATE a SET s = 'x' WHERE id < 10",
        "SELECT * FROM lance_merge('pa', (SELECT id, s FROM a WHERE id < 60), 'id', \
         'when_matched_if=target.s IS DISTINCT FROM source.s', \
         'when_not_matched_by_source_if=target.id > 1000')",
        "INSERT OR REPLACE INTO pa SELECT id, 'r' FROM a WHERE id < 5",
        "MERGE INTO pa AS tg USING (SELECT id, s FROM a) AS src ON tg.id = src.id \
         WHEN MATCHED THEN DELETE WHEN NOT MATCHED BY SOURCE AND tg.id < 3 THEN DELETE",
        "SELECT * FROM lance_vacuum('a', 'older_than=90m', 'orphans_older_than=3d')",
        "SELECT * FROM lance_tag('a', 'create', 'fields', 1)",
        "SELECT id, _rowid, _rowaddr FROM lance_rows('a') WHERE _rowid > 3",
        "CREATE INDEX IF NOT EXISTS fields_idx ON a USING IVF_HNSW_PQ (v) \
         WITH (num_partitions = 3, m = 9, metric = 'dot', replace = true)",
        "DROP INDEX IF EXISTS fields_idx ON a",
        "SELECT * FROM lance_optimize('a', 'target_rows_per_fragment=77', \
         'materialize_deletions=false', 'materialize_deletions_threshold=0.5', 'indices=false')",
        "COPY (SELECT id FROM a) TO '{dir}/fields.lance' STORED AS LANCE \
         OPTIONS ('lance.max_rows_per_file' '5', 'lance.data_storage_version' '2.0', \
         'lance.enable_stable_row_ids' 'true')",
    ];
    let codec = LancePhysicalCodec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for statement in statements {
        let statement = t.for_table(statement, "a");
        let plan = t
            .origin
            .lance_sql(&statement)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
        let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &codec).unwrap();
        let decoded =
            physical_plan_from_bytes_with_extension_codec(&bytes, &t.worker.task_ctx(), &codec)
                .unwrap();
        let (mut before, mut after) = (Vec::new(), Vec::new());
        node_data(&plan, &mut before);
        node_data(&decoded, &mut after);
        assert!(!before.is_empty(), "{statement}: no Lance node");
        assert_eq!(after, before, "{statement}");
        for data in &before {
            kinds.insert(format!("{data:?}").split('(').next().unwrap().to_string());
        }
    }
    // A sink with a required input order.
    let provider = LanceTableProvider::builder(dataset_path(&t.dir, "b.lance"))
        .build()
        .await
        .unwrap();
    let sink = provider
        .data_sink(&t.origin.state(), InsertOp::Overwrite)
        .await
        .unwrap();
    let input = t
        .origin
        .sql("SELECT * FROM b")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let order = LexRequirement::new([PhysicalSortRequirement::new(
        Arc::new(Column::new("id", 0)),
        Some(SortOptions::new(true, false)),
    )]);
    let plan: Arc<dyn ExecutionPlan> = Arc::new(DataSinkExec::new(
        Arc::new(CoalescePartitionsExec::new(input)),
        Arc::new(sink),
        order,
    ));
    let decoded = ship_physical(&plan, &t.worker);
    let (mut before, mut after) = (Vec::new(), Vec::new());
    node_data(&plan, &mut before);
    node_data(&decoded, &mut after);
    assert_eq!(after, before);
    assert!(matches!(&after[0], NodeData::Sink(_, _, Some(_))));
    kinds.insert("Sink".into());
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            "Commit", "Delete", "Index", "Merge", "Optimize", "Scan", "Sink", "Tag", "Update",
            "Vacuum", "Write"
        ]
    );
}

/// No node or provider carries a table's storage options, or credentials in
/// its URI, unless the encoder is told to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_plan_carries_credentials_unless_asked() {
    const SECRET: &str = "top-secret-value";
    let contains = |bytes: &[u8]| bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "s.lance");
    fixtures::numbers(&uri).await;
    let ctx = context(2, &private_cache());
    sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE s STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.storage.aws_secret_access_key' '{SECRET}')"
        ),
    )
    .await
    .unwrap();
    let keyed = dataset_path(&dir, "p.lance");
    sql(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE p (id BIGINT NOT NULL, s VARCHAR, PRIMARY KEY (id)) \
             STORED AS LANCE LOCATION '{keyed}' \
             OPTIONS ('lance.storage.aws_secret_access_key' '{SECRET}')"
        ),
    )
    .await
    .unwrap();
    let physical = LancePhysicalCodec::new();
    let logical = LanceLogicalCodec::new();
    let statements = [
        "SELECT id FROM s WHERE id > 3",
        "INSERT INTO s SELECT * FROM s WHERE id < 3",
        "DELETE FROM s WHERE id < 3",
        "UPDATE s SET s = 'x' WHERE id < 5",
        "SELECT * FROM lance_merge('p', (SELECT id, s FROM s WHERE id < 9), 'id')",
        "SELECT * FROM lance_versions('s')",
        "SELECT * FROM lance_vacuum('s')",
    ];
    for statement in statements {
        let df = ctx.lance_sql(statement).await.unwrap();
        let state = ctx.state();
        let resolved = resolve_lance_tables(state.optimize(df.logical_plan()).unwrap(), &state)
            .await
            .unwrap();
        let bytes = logical_plan_to_bytes_with_extension_codec(&resolved, &logical).unwrap();
        assert!(!contains(&bytes), "{statement}: logical plan");
        let plan = df.create_physical_plan().await.unwrap();
        let bytes =
            physical_plan_to_bytes_with_extension_codec(Arc::clone(&plan), &physical).unwrap();
        assert!(!contains(&bytes), "{statement}: physical plan");
        let carried = physical_plan_to_bytes_with_extension_codec(
            plan,
            &LancePhysicalCodec::new().with_storage_options_in_plan(true),
        )
        .unwrap();
        if !statement.contains("lance_versions") {
            // (lance_versions plans a list of versions, no table node.)
            assert!(contains(&carried), "{statement}: asked to carry them");
        }
    }

    // Credentials in a URI are credentials too.
    let in_uri = format!("s3://AKIAEXAMPLE:{SECRET}@bucket/t.lance");
    let scan: Arc<dyn ExecutionPlan> = Arc::new(LanceScanExec::from_parts(ScanParts {
        location: TableLocation::new(in_uri.clone(), Default::default()),
        ..scan_with(3, &[])
            .downcast_ref::<LanceScanExec>()
            .unwrap()
            .parts()
    }));
    let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&scan), &physical).unwrap();
    assert!(!contains(&bytes));
    let carried = physical_plan_to_bytes_with_extension_codec(
        scan,
        &LancePhysicalCodec::new().with_storage_options_in_plan(true),
    )
    .unwrap();
    assert!(contains(&carried));
    let vacuum = ctx
        .sql(&format!("SELECT * FROM lance_vacuum('{in_uri}')"))
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let bytes = logical_plan_to_bytes_with_extension_codec(&vacuum, &logical).unwrap();
    assert!(!contains(&bytes));
}
