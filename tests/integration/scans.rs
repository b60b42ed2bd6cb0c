//! Scan options: how the automatic batch size follows the data.

use std::sync::Arc;

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::array::{Array, BinaryArray};
use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use lance::dataset::WriteMode;

use crate::fixtures::{params, write};
use crate::support::{context, dataset_path, private_cache};
use crate::support::{ints, ok, sql};

/// The most bytes per scanned batch the automatic batch size promises.
const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;

/// 3,000 rows whose strings are 20 KiB each (60 MB): the automatic batch
/// size keeps every batch within 2 MiB, sized from the data Lance decodes;
/// 100-byte strings still get large batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_automatic_batch_size_follows_string_lengths() {
    let dir = tempfile::tempdir().unwrap();
    for (name, length, min_rows) in [("long", 20 * 1024, 1), ("short", 100, 8192)] {
        let uri = dataset_path(&dir, &format!("{name}.lance"));
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..3000)),
                Arc::new(StringArray::from_iter_values(
                    (0..3000).map(|i| format!("{i:0>width$}", width = length)),
                )),
            ],
        )
        .unwrap();
        // one fragment, so a batch is not cut short by a fragment's end
        write(&uri, vec![batch], params(WriteMode::Create, 1 << 20)).await;
        let ctx = context(1, &private_cache());
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .unwrap();
        let stream = ctx
            .sql(&format!("SELECT id, s FROM {name}"))
            .await
            .unwrap()
            .execute_stream()
            .await
            .unwrap();
        let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 3000, "{name}");
        let largest = batches
            .iter()
            .map(|b| b.get_array_memory_size())
            .max()
            .unwrap();
        assert!(
            largest <= MAX_BATCH_BYTES,
            "{name}: a batch of {largest} bytes ({} batches)",
            batches.len()
        );
        let most_rows = batches.iter().map(|b| b.num_rows()).max().unwrap();
        assert!(
            most_rows >= min_rows.min(3000),
            "{name}: {most_rows} rows per batch"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_values_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t.lance");
    let ctx = context(2, &private_cache());
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, i BIGINT, f DOUBLE, s VARCHAR, b BYTEA, \
             ts TIMESTAMP, d DECIMAL(38, 10), l BIGINT[], st STRUCT<a INT, inner STRUCT<x VARCHAR>>, \
             emb FLOAT[3], allnull INT) STORED AS LANCE LOCATION '{uri}'"
        ),
    )
    .await;
    let big = "ab".repeat(256 * 1024); // 256 KiB once decoded
    ok(
        &ctx,
        &format!(
            "INSERT INTO t VALUES \
             (1, -9223372036854775808, -0.0, 'nul' || chr(0) || ' and ''quotes'' \"dq\"', X'00FF', \
              TIMESTAMP '1677-09-21T00:12:43.145224192', \
              CAST('9999999999999999999999999999.9999999999' AS DECIMAL(38, 10)), \
              [], named_struct('a', 1, 'inner', named_struct('x', 'deep')), [0.5, -0.0, 1e30], NULL), \
             (2, 9223372036854775807, 0.0, '', decode('{big}', 'hex'), \
              TIMESTAMP '2262-04-11T23:47:16.854775807', \
              CAST('-9999999999999999999999999999.9999999999' AS DECIMAL(38, 10)), \
              [NULL, 1], NULL, NULL, NULL), \
             (3, NULL, 'NaN', NULL, NULL, NULL, 0, NULL, named_struct('a', CAST(NULL AS INT), 'inner', CAST(NULL AS STRUCT<x VARCHAR>)), [1, 2, 3], NULL), \
             (4, 0, 'inf', 'x', X'', NULL, NULL, [-1], NULL, NULL, NULL), \
             (5, 0, '-inf', 'x', NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
        ),
    )
    .await;
    let rows = crate::support::sorted_rows(
        &sql(&ctx, "SELECT id, i, s, ts, d, l, st, emb, allnull FROM t")
            .await
            .unwrap(),
    );
    assert_eq!(
        rows,
        vec![
            "1|-9223372036854775808|nul\0 and 'quotes' \"dq\"|1677-09-21T00:12:43.145224192|9999999999999999999999999999.9999999999|[]|{a: 1, inner: {x: deep}}|[0.5, -0.0, 1e30]|NULL".to_string(),
            "2|9223372036854775807||2262-04-11T23:47:16.854775807|-9999999999999999999999999999.9999999999|[NULL, 1]|NULL|NULL|NULL".to_string(),
            "3|NULL|NULL|NULL|0.0000000000|NULL|{a: NULL, inner: NULL}|[1.0, 2.0, 3.0]|NULL".to_string(),
            "4|0|x|NULL|NULL|[-1]|NULL|NULL|NULL".to_string(),
            "5|0|x|NULL|NULL|NULL|NULL|NULL|NULL".to_string(),
        ]
    );
    // binary values byte for byte, a 256 KiB one included
    let batches = sql(&ctx, "SELECT b FROM t ORDER BY id").await.unwrap();
    let b: Vec<Option<Vec<u8>>> = batches
        .iter()
        .flat_map(|batch| {
            let a = batch
                .column(0)
                .as_any()
                .downcast_ref::<BinaryArray>()
                .unwrap();
            (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| a.value(i).to_vec()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(b[0].as_deref(), Some(&[0x00u8, 0xff][..]));
    assert_eq!(b[1].as_deref(), Some(&vec![0xabu8; 256 * 1024][..]));
    assert_eq!(b[2], None);
    assert_eq!(b[3].as_deref(), Some(&[][..]));

    // floats bit for bit: the sign of zero, NaN, infinities
    let batches = sql(&ctx, "SELECT f FROM t ORDER BY id").await.unwrap();
    let f: Vec<f64> = batches
        .iter()
        .flat_map(|b| {
            let a = b.column(0).as_any().downcast_ref::<Float64Array>().unwrap();
            (0..a.len()).map(|i| a.value(i)).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(f[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(f[1].to_bits(), 0.0f64.to_bits());
    assert!(f[2].is_nan());
    assert_eq!(f[3], f64::INFINITY);
    assert_eq!(f[4], f64::NEG_INFINITY);

    // 100 columns
    let columns: Vec<String> = (0..100).map(|i| format!("c{i} INT")).collect();
    ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE wide ({}) STORED AS LANCE LOCATION '{}'",
            columns.join(", "),
            dataset_path(&dir, "wide.lance")
        ),
    )
    .await;
    let values: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    ok(
        &ctx,
        &format!("INSERT INTO wide VALUES ({})", values.join(", ")),
    )
    .await;
    assert_eq!(
        ints(&ctx, "SELECT c0, c42, c99 FROM wide").await,
        vec![0, 42, 99]
    );
}

/// The scan's metrics in `EXPLAIN ANALYZE` of `query`, by name (summed over
/// partitions).
async fn scan_metrics(
    ctx: &datafusion::prelude::SessionContext,
    query: &str,
) -> std::collections::BTreeMap<String, String> {
    let line = scan_line(ctx, &format!("EXPLAIN ANALYZE {query}")).await;
    let metrics = line
        .split_once("metrics=[")
        .unwrap_or_else(|| panic!("no metrics in {line}"))
        .1;
    let metrics = metrics.split_once(']').unwrap().0;
    metrics
        .split(", ")
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `EXPLAIN ANALYZE` shows what Lance read: every fragment without an
/// index; with a ZONEMAP or BTREE index on the filter column, only the one
/// fragment holding the rows. The index search that chose it ran while
/// planning; Lance searches again only when the fragments left hold more
/// than one batch of rows (here: a batch size of 4 rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_shows_fragments_read_and_index_searches() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t");
    let batch = crate::fixtures::numbers_batch(0, 1000);
    write(&uri, vec![batch], params(WriteMode::Create, 10)).await;
    let ctx = context(2, &private_cache());
    let create = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    ok(&ctx, &create).await;
    let query = "SELECT count(*), sum(id) FROM t WHERE id < 10";

    let m = scan_metrics(&ctx, query).await;
    assert_eq!(m["fragments_read"], "100", "{m:?}");
    assert_eq!(m["index_searches"], "0", "{m:?}");
    assert_eq!(ints(&ctx, query).await, vec![10, 45]);

    for (index, kind) in [("z", "ZONEMAP"), ("b", "BTREE")] {
        ok(
            &ctx,
            &format!("CREATE INDEX {index} ON t USING {kind} (id)"),
        )
        .await;
        for (batch_size, searches) in [(8192, false), (4, true)] {
            let set = format!("SET datafusion.execution.batch_size = {batch_size}");
            ok(&ctx, &set).await;
            let line = scan_line(&ctx, &format!("EXPLAIN {query}")).await;
            assert!(line.contains("pruned_fragments=99"), "{kind}: {line}");
            let m = scan_metrics(&ctx, query).await;
            let at = format!("{kind}, batch size {batch_size}: {m:?}");
            assert_eq!(m["fragments_read"], "1", "{at}");
            assert_eq!(m["rows_scanned"], "10", "{at}");
            assert_eq!(m["index_searches"] != "0", searches, "{at}");
            assert_eq!(ints(&ctx, query).await, vec![10, 45], "{at}");
        }
        ok(&ctx, "SET datafusion.execution.batch_size = 8192").await;
        ok(&ctx, &format!("DROP INDEX {index} ON t")).await;
    }
}

/// The `LanceScanExec` line of the plan an `EXPLAIN [ANALYZE]` statement shows.
async fn scan_line(ctx: &datafusion::prelude::SessionContext, explain: &str) -> String {
    let batches = sql(ctx, explain).await.unwrap();
    let plan = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    plan.lines()
        .find(|l| l.contains("LanceScanExec"))
        .unwrap_or_else(|| panic!("no LanceScanExec in\n{plan}"))
        .to_string()
}

/// A BTREE or ZONEMAP index on the filter column prunes fragments while
/// planning: Lance is handed only the fragments that may hold matches plus
/// those the index does not cover (rows appended after it was built), and the
/// answer is the one without the index. The pruned plan round-trips.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_prunes_fragments_at_planning() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dataset_path(&dir, "t");
    write(
        &uri,
        vec![crate::fixtures::numbers_batch(0, 1000)],
        params(WriteMode::Create, 10),
    )
    .await;
    let ctx = context(2, &private_cache());
    let create = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");
    ok(&ctx, &create).await;
    let query = "SELECT count(*), sum(id) FROM t WHERE id < 25";
    let none = "SELECT count(*) FROM t WHERE id > 5000";

    let plain = scan_line(&ctx, &format!("EXPLAIN {query}")).await;
    assert!(plain.contains("fragments=100,"), "{plain}");
    assert!(!plain.contains("pruned_fragments"), "{plain}");

    for kind in ["BTREE", "ZONEMAP"] {
        ok(&ctx, &format!("CREATE INDEX i ON t USING {kind} (id)")).await;
        let line = scan_line(&ctx, &format!("EXPLAIN {query}")).await;
        assert!(line.contains("fragments=3,"), "{kind}: {line}");
        assert!(line.contains("pruned_fragments=97"), "{kind}: {line}");
        assert_eq!(ints(&ctx, query).await, vec![25, 300], "{kind}");
        // No fragment can match: Lance gets none.
        let line = scan_line(&ctx, &format!("EXPLAIN {none}")).await;
        assert!(line.contains("fragments=0,"), "{kind}: {line}");
        assert!(line.contains("pruned_fragments=100"), "{kind}: {line}");
        assert_eq!(ints(&ctx, none).await, vec![0], "{kind}");
        ok(&ctx, "DROP INDEX i ON t").await;
    }

    // Rows appended after the index was built live in fragments it does not
    // cover: those are always read.
    ok(&ctx, "CREATE INDEX i ON t USING BTREE (id)").await;
    ok(
        &ctx,
        "INSERT INTO t SELECT id - 2000, v, s, b, d FROM t WHERE id < 3",
    )
    .await;
    ok(&ctx, "DELETE FROM t WHERE id = 1").await;
    let line = scan_line(&ctx, &format!("EXPLAIN {query}")).await;
    assert!(line.contains("fragments=4,"), "{line}");
    assert!(line.contains("pruned_fragments=97"), "{line}");
    let indexed = ints(&ctx, query).await;
    assert_eq!(indexed, vec![27, 299 - 5997]);
    ok(&ctx, "SET lance.use_scalar_index = false").await;
    let line = scan_line(&ctx, &format!("EXPLAIN {query}")).await;
    assert!(!line.contains("pruned_fragments"), "{line}");
    assert_eq!(ints(&ctx, query).await, indexed);
    ok(&ctx, "SET lance.use_scalar_index = true").await;

    // The pruned plan is data: it round-trips and runs elsewhere.
    let plan = ctx
        .sql(query)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let worker = context(2, &private_cache());
    let decoded = crate::codec::ship_physical(&plan, &worker);
    let batches = datafusion::physical_plan::collect(decoded, worker.task_ctx())
        .await
        .unwrap();
    let count = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(count, 27);
}
