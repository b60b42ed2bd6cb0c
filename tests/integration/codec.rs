//! Plans as data: every Lance physical node and every provider the crate
//! creates round-trips through the codecs, and the decoded plan — run in
//! another context with its own Lance session and no tables registered, as
//! a remote worker would — shows the same `EXPLAIN` and gives the same rows
//! as the original statement run on a twin table.

use std::sync::Arc;

use datafusion::datasource::sink::DataSinkExec;
use datafusion::logical_expr::LogicalPlan;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::{ExecutionPlan, collect, displayable};
use datafusion::prelude::SessionContext;
use datafusion_lance::physical_plan::{GroupRows, ScanOptions, ScanParts};
use datafusion_lance::{
    LanceLogicalCodec, LancePhysicalCodec, LanceScanExec, LanceSessionContextExt,
    LanceTableProvider, resolve_lance_tables,
};
use datafusion_lance::{Snapshot, TableLocation};
use datafusion_proto::bytes::{
    logical_plan_from_bytes_with_extension_codec, logical_plan_to_bytes_with_extension_codec,
    physical_plan_from_bytes_with_extension_codec, physical_plan_to_bytes_with_extension_codec,
};
use tempfile::TempDir;

use crate::fixtures;
use crate::support::{context, dataset_path, ints, private_cache, sorted_rows, sql};

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
fn ship_physical(plan: &Arc<dyn ExecutionPlan>, worker: &SessionContext) -> Arc<dyn ExecutionPlan> {
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
    "SELECT * FROM lance_merge('{p}', (SELECT id, 'merged' AS s FROM {t} WHERE id BETWEEN 40 AND 60), \
     'id', 'when_matched_if=target.s IS NOT NULL')",
    "INSERT OR REPLACE INTO {p} SELECT id, 'replaced' FROM {t} WHERE id BETWEEN 55 AND 70",
    "MERGE INTO {p} AS tg USING (SELECT id, s FROM {t} WHERE id BETWEEN 65 AND 80) AS src \
     ON tg.id = src.id \
     WHEN MATCHED AND tg.s <> 'tg.x' THEN UPDATE SET s = src.s \
     WHEN NOT MATCHED THEN INSERT (id, s) VALUES (src.id, src.s) \
     WHEN NOT MATCHED BY SOURCE AND tg.id < 3 THEN DELETE",
    "INSERT OVERWRITE {t} SELECT * FROM {t} WHERE id % 2 = 0",
    "COPY (SELECT id, s FROM {t} WHERE id < 100) TO '{dir}/copy_{t}.lance' STORED AS LANCE",
    "SELECT version, operation, fragments, rows FROM lance_versions('{t}')",
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
    let ctx = datafusion_lance::enable_lance_url_tables(ctx);
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
    let plan = t
        .origin
        .sql("SELECT * FROM lance_versions('a')")
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let codec = LanceLogicalCodec::new();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let decoded =
        logical_plan_from_bytes_with_extension_codec(&bytes, &t.worker.task_ctx(), &codec).unwrap();
    let error = t
        .worker
        .execute_logical_plan(decoded)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("'a' is neither a Lance table nor a Lance dataset location"),
        "{error}"
    );
    // The cache statistics are those of the session that plans the query.
    let plan = t
        .origin
        .sql("SELECT cache FROM lance_cache_stats()")
        .await
        .unwrap()
        .logical_plan()
        .clone();
    let bytes = logical_plan_to_bytes_with_extension_codec(&plan, &codec).unwrap();
    let decoded =
        logical_plan_from_bytes_with_extension_codec(&bytes, &t.worker.task_ctx(), &codec).unwrap();
    let rows = t
        .worker
        .execute_logical_plan(decoded)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        sorted_rows(&rows),
        vec!["datasets", "index", "metadata", "object_stores", "session"]
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
    let decoded =
        logical_plan_from_bytes_with_extension_codec(&bytes, &t.worker.task_ctx(), &codec).unwrap();
    let rows = t
        .worker
        .execute_logical_plan(decoded)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
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

/// A scan's bytes grow with its fragment id list only (about two bytes per
/// fragment id below 16,384), never with the manifest.
#[test]
fn an_encoded_scan_grows_with_its_fragment_ids_only() {
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
