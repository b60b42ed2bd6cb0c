//! Memory limits: what this crate's statements hold is reserved from
//! DataFusion's memory pool, so `SET datafusion.runtime.memory_limit`
//! bounds it and a statement over the limit fails clearly, writing nothing.

use datafusion::prelude::SessionContext;
use datafusion_lance::LanceSessionContextExt;

use crate::support::{context, dataset_path, ints, private_cache, run};

/// Runs `sql` (any statement, as `lance-sql` takes it) to the end.
async fn statement(ctx: &SessionContext, sql: &str) -> Result<(), String> {
    let df = ctx.lance_sql(sql).await.map_err(|e| e.to_string())?;
    df.collect().await.map(drop).map_err(|e| e.to_string())
}

/// The error of `sql` run under a memory limit of `limit` (the limit stays
/// set); `why` says why it must fail.
async fn refused(ctx: &SessionContext, limit: &str, sql: &str, why: &str) -> String {
    run(
        ctx,
        &format!("SET datafusion.runtime.memory_limit = '{limit}'"),
    )
    .await;
    statement(ctx, sql).await.expect_err(why)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_source_over_the_memory_limit_fails_clearly_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    run(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    run(
        &ctx,
        "INSERT INTO t SELECT value AS id, value AS v, 'x' AS tag FROM generate_series(0, 999)",
    )
    .await;
    let version = "SELECT max(version) FROM lance_versions('t')";
    let before = ints(&ctx, version).await;
    // 200,000 source rows of ~40 bytes: ~8 MB held until the merge runs.
    let merge = "SELECT * FROM lance_merge('t', (SELECT value AS id, value + 1 AS v, \
                 repeat('y', 24) AS tag FROM generate_series(0, 199999)), 'id')";

    let error = refused(
        &ctx,
        "2M",
        merge,
        "a merge holding ~8 MB under a 2 MB limit",
    )
    .await;
    assert!(
        error.contains("Resources exhausted") && error.contains("LanceMergeExec source"),
        "{error}"
    );
    assert_eq!(ints(&ctx, version).await, before);
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t WHERE v = id").await,
        [1000]
    );

    // The source fits (~8.8 MB, ~10.4 MB with its key hashes) but not with
    // Lance's join, reserved at the source's size again before Lance starts.
    let why = "a merge and its join needing ~17 MB under a 12 MB limit";
    let error = refused(&ctx, "12M", merge, why).await;
    assert!(
        error.contains("Resources exhausted") && error.contains("Lance's merge join"),
        "{error}"
    );
    assert_eq!(ints(&ctx, version).await, before);

    run(&ctx, "SET datafusion.runtime.memory_limit = '512M'").await;
    run(&ctx, merge).await;
    assert_eq!(ints(&ctx, version).await, [before[0] + 1]);
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t WHERE v = id + 1").await,
        [200_000]
    );
}

/// An `INSERT`'s writers reserve their column buffers from the pool: with
/// room they take Lance's default, under a tight limit smaller buffers (the
/// rows are the same), and below the least a writer needs the statement
/// fails clearly and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_writers_buffer_within_the_memory_limit_or_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    run(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT, tag VARCHAR) \
             STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    let insert = |from: i64| {
        format!(
            "INSERT INTO t SELECT value AS id, value * 2 AS v, repeat('z', 16) AS tag \
             FROM generate_series({from}, {}) ",
            from + 199_999
        )
    };
    let version = "SELECT max(version) FROM lance_versions('t')";
    let rows = "SELECT count(*), sum(v - 2 * id), sum(length(tag)) FROM t";

    // Room for Lance's default (2 writers × 3 columns × 8 MiB).
    run(&ctx, "SET datafusion.runtime.memory_limit = '128M'").await;
    run(&ctx, &insert(0)).await;
    assert_eq!(ints(&ctx, rows).await, [200_000, 0, 3_200_000]);

    // 4 MiB: each writer gets far less than Lance's default (at most half of
    // what is left: 512 KiB or 256 KiB per column); the same rows arrive.
    run(&ctx, "SET datafusion.runtime.memory_limit = '4M'").await;
    run(&ctx, &insert(200_000)).await;
    assert_eq!(ints(&ctx, rows).await, [400_000, 0, 6_400_000]);
    let before = ints(&ctx, version).await;

    // 100 KiB: less than one writer's least (3 columns × 64 KiB).
    let why = "writers needing 192 KiB under a 100 KiB limit";
    let error = refused(&ctx, "100K", &insert(400_000), why).await;
    assert!(
        error.contains("Resources exhausted")
            && error.contains("writing to 't': a writer buffers at least 64 KiB per column"),
        "{error}"
    );
    run(&ctx, "SET datafusion.runtime.memory_limit = '512M'").await;
    assert_eq!(ints(&ctx, version).await, before);
    assert_eq!(ints(&ctx, rows).await, [400_000, 0, 6_400_000]);
    crate::support::validates(&uri).await;
}

/// `CREATE INDEX` reserves what Lance's builder is estimated to hold (it
/// builds outside DataFusion's pool): under a limit below the estimate the
/// statement fails naming the index and the table gains no index and no
/// version; an index that exists is left alone under `IF NOT EXISTS`
/// without reserving anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_builds_reserve_their_estimate_or_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "v.lance");
    let ctx = context(2, &private_cache());
    run(
        &ctx,
        &format!(
            "COPY (SELECT value AS id, repeat('w', 20) || CAST(value AS VARCHAR) AS txt, \
             arrow_cast(make_array(CAST(value % 13 AS FLOAT), CAST(value % 7 AS FLOAT), 1.0, 2.0), \
             'FixedSizeList(4, Float32)') AS emb FROM generate_series(0, 1999)) \
             TO '{uri}' STORED AS LANCE"
        ),
    )
    .await;
    run(
        &ctx,
        &format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'"),
    )
    .await;
    let version = "SELECT max(version) FROM lance_versions('v')";
    let indices = "SELECT count(*) FROM lance_indices('v')";
    let before = ints(&ctx, version).await;

    // A vector build: 64 MiB plus four times its 31 KiB of vectors.
    let flat = "CREATE INDEX v_emb ON v USING IVF_FLAT (emb) WITH (num_partitions = 2)";
    let why = "an IVF_FLAT build estimated at 65 MiB under 48 MiB";
    let error = refused(&ctx, "48M", flat, why).await;
    assert!(
        error.contains("Resources exhausted")
            && error.contains("building index 'v_emb' of")
            && error.contains("estimated at 65 MiB for 1 MiB of column data"),
        "{error}"
    );
    // A scalar build over strings (sized from Lance's data statistics):
    // 32 MiB plus twice its values and row ids.
    let btree = "CREATE INDEX v_txt ON v USING BTREE (txt)";
    let error = refused(
        &ctx,
        "24M",
        btree,
        "a BTREE build estimated at 33 MiB under 24 MiB",
    )
    .await;
    assert!(
        error.contains("Resources exhausted") && error.contains("building index 'v_txt' of"),
        "{error}"
    );
    run(&ctx, "SET datafusion.runtime.memory_limit = '512M'").await;
    assert_eq!(ints(&ctx, version).await, before);
    assert_eq!(ints(&ctx, indices).await, [0]);

    statement(&ctx, flat).await.unwrap();
    statement(&ctx, btree).await.unwrap();
    assert_eq!(ints(&ctx, indices).await, [2]);
    let built = ints(&ctx, version).await;
    assert_eq!(built, [before[0] + 2]);

    // Nothing to build, nothing reserved.
    run(&ctx, "SET datafusion.runtime.memory_limit = '1M'").await;
    let again =
        "CREATE INDEX IF NOT EXISTS v_emb ON v USING IVF_FLAT (emb) WITH (num_partitions = 2)";
    statement(&ctx, again).await.unwrap();
    run(&ctx, "SET datafusion.runtime.memory_limit = '512M'").await;
    assert_eq!(ints(&ctx, version).await, built);
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM v WHERE id < 10").await,
        [10]
    );
}
