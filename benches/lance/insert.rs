//! Insert table: SQL writes (parallel writers, one commit) vs Lance's
//! `InsertBuilder` on the same batches, creating a table and appending to
//! one, and a naive sink committing per batch.

use std::sync::{Arc, Mutex};

use arrow::array::{RecordBatch, RecordBatchIterator};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;
use datafusion_lance::options::DEFAULT_STORAGE_VERSION;
use lance::Dataset;
use lance::dataset::{InsertBuilder, WriteDestination, WriteMode, WriteParams};

use crate::common::{Args, interleaved, lineitem, ratio, schema, side_with_setup};
use crate::read::{config, run_sql};

const COLUMNS: &str = "l_quantity DOUBLE NOT NULL, l_extendedprice DOUBLE NOT NULL, \
    l_discount DOUBLE NOT NULL, l_tax DOUBLE NOT NULL, l_returnflag VARCHAR NOT NULL, \
    l_linestatus VARCHAR NOT NULL, l_shipdate DATE NOT NULL";

/// A context with the 4-partition source registered as `source`.
fn sql_context(partitions: &[Vec<RecordBatch>]) -> SessionContext {
    let ctx = datafusion_lance::lance_session_context(config(4));
    ctx.register_table(
        "source",
        Arc::new(MemTable::try_new(schema(), partitions.to_vec()).expect("memtable")),
    )
    .expect("register");
    ctx
}

fn params(mode: WriteMode) -> WriteParams {
    WriteParams {
        mode,
        data_storage_version: Some(DEFAULT_STORAGE_VERSION),
        ..Default::default()
    }
}

async fn builder_write(
    dest: WriteDestination<'_>,
    mode: WriteMode,
    batches: &[RecordBatch],
) -> Dataset {
    let reader = RecordBatchIterator::new(Vec::from(batches).into_iter().map(Ok), schema());
    InsertBuilder::new(dest)
        .with_params(&params(mode))
        .execute_stream(Box::new(reader) as Box<dyn arrow::array::RecordBatchReader + Send>)
        .await
        .expect("insert")
}

/// Versions and fragments of the table a run wrote.
type Shape = (u64, usize);

pub(crate) async fn insert_table(args: &Args) {
    let rows = args.rows;
    let batch = 8192;
    // A 4-partition in-memory source, built once.
    let partitions: Vec<Vec<RecordBatch>> = (0..4)
        .map(|p| {
            let (lo, hi) = (rows * p / 4, rows * (p + 1) / 4);
            (lo..hi)
                .step_by(batch)
                .map(|s| lineitem(s, batch.min(hi - s)))
                .collect()
        })
        .collect();
    let all: Vec<RecordBatch> = partitions.iter().flatten().cloned().collect();
    let fresh = || {
        tempfile::Builder::new()
            .prefix("insert-bench-")
            .tempdir_in(&args.dir)
            .expect("dir")
    };
    let uri = |dir: &tempfile::TempDir| dir.path().join("t.lance").to_string_lossy().to_string();
    println!("\n## INSERT: {rows} rows from a 4-partition source\n");
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores used; every run writes a new \
         table. Ratio: datafusion-lance's time ÷ InsertBuilder's.\n",
        args.iters
    );
    println!(
        "| write | datafusion-lance (SQL) | Lance InsertBuilder | ÷ InsertBuilder | versions / fragments (SQL, builder) |"
    );
    println!("|---|---|---|---|---|");

    // 1. Create the table and write it: COPY ... STORED AS LANCE vs
    //    InsertBuilder in Create mode — one version each.
    let shapes: Arc<Mutex<Vec<Shape>>> = Arc::default();
    let ctx = sql_context(&partitions);
    let stats = interleaved(
        args.iters,
        &mut [
            side_with_setup(
                || std::future::ready(fresh()),
                |dir: tempfile::TempDir| {
                    let (ctx, shapes) = (ctx.clone(), Arc::clone(&shapes));
                    async move {
                        let uri = uri(&dir);
                        run_sql(
                            &ctx,
                            &format!("COPY (SELECT * FROM source) TO '{uri}' STORED AS LANCE"),
                        )
                        .await;
                        let ds = Dataset::open(&uri).await.expect("open");
                        shapes
                            .lock()
                            .unwrap()
                            .push((ds.version_id(), ds.count_fragments()));
                    }
                },
            ),
            side_with_setup(
                || std::future::ready(fresh()),
                |dir: tempfile::TempDir| {
                    let (all, shapes) = (all.clone(), Arc::clone(&shapes));
                    async move {
                        let uri = uri(&dir);
                        let ds =
                            builder_write(WriteDestination::Uri(&uri), WriteMode::Create, &all)
                                .await;
                        shapes
                            .lock()
                            .unwrap()
                            .push((ds.version_id(), ds.count_fragments()));
                    }
                },
            ),
        ],
    )
    .await;
    let s = shapes.lock().unwrap().clone();
    println!(
        "| create + write (COPY ... STORED AS LANCE / Create) | {} | {} | {} | {} / {}, {} / {} |",
        stats[0].cell(),
        stats[1].cell(),
        ratio(&stats[0], &stats[1]),
        s[0].0,
        s[0].1,
        s[1].0,
        s[1].1
    );

    // 2. Append to an existing empty table (created the same way for both
    //    sides, outside the timing): INSERT INTO vs InsertBuilder Append.
    let shapes: Arc<Mutex<Vec<Shape>>> = Arc::default();
    let prepare = || {
        let dir = fresh();
        async move {
            let uri = uri(&dir);
            let ctx = datafusion_lance::lance_session_context(config(1));
            run_sql(
                &ctx,
                &format!("CREATE EXTERNAL TABLE t ({COLUMNS}) STORED AS LANCE LOCATION '{uri}'"),
            )
            .await;
            (dir, uri)
        }
    };
    let stats = interleaved(
        args.iters,
        &mut [
            side_with_setup(prepare, |(dir, uri): (tempfile::TempDir, String)| {
                let (partitions, shapes) = (partitions.clone(), Arc::clone(&shapes));
                async move {
                    let ctx = sql_context(&partitions);
                    run_sql(
                        &ctx,
                        &format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"),
                    )
                    .await;
                    run_sql(&ctx, "INSERT INTO t SELECT * FROM source").await;
                    let ds = Dataset::open(&uri).await.expect("open");
                    shapes
                        .lock()
                        .unwrap()
                        .push((ds.version_id() - 1, ds.count_fragments()));
                    drop(dir);
                }
            }),
            side_with_setup(prepare, |(dir, uri): (tempfile::TempDir, String)| {
                let (all, shapes) = (all.clone(), Arc::clone(&shapes));
                async move {
                    let ds = Arc::new(Dataset::open(&uri).await.expect("open"));
                    let ds =
                        builder_write(WriteDestination::Dataset(ds), WriteMode::Append, &all).await;
                    shapes
                        .lock()
                        .unwrap()
                        .push((ds.version_id() - 1, ds.count_fragments()));
                    drop(dir);
                }
            }),
        ],
    )
    .await;
    let s = shapes.lock().unwrap().clone();
    println!(
        "| append to an existing table (INSERT INTO / Append) | {} | {} | {} | +{} / {}, +{} / {} |",
        stats[0].cell(),
        stats[1].cell(),
        ratio(&stats[0], &stats[1]),
        s[0].0,
        s[0].1,
        s[1].0,
        s[1].1
    );

    // 3. A naive sink committing every 8192-row batch (first 1M rows).
    let naive: Vec<RecordBatch> = all
        .iter()
        .scan(0usize, |seen, b| {
            *seen += b.num_rows();
            (*seen <= 1_000_000).then(|| b.clone())
        })
        .collect();
    let naive_rows: usize = naive.iter().map(|b| b.num_rows()).sum();
    let shapes: Arc<Mutex<Vec<Shape>>> = Arc::default();
    let stats = interleaved(
        args.iters,
        &mut [side_with_setup(
            || std::future::ready(fresh()),
            |dir: tempfile::TempDir| {
                let (naive, shapes) = (naive.clone(), Arc::clone(&shapes));
                async move {
                    let uri = uri(&dir);
                    let mut ds: Option<Dataset> = None;
                    for b in naive {
                        let mode = if ds.is_none() {
                            WriteMode::Create
                        } else {
                            WriteMode::Append
                        };
                        let reader = RecordBatchIterator::new([Ok(b)], schema());
                        ds = Some(
                            Dataset::write(reader, uri.as_str(), Some(params(mode)))
                                .await
                                .expect("write"),
                        );
                    }
                    let ds = ds.expect("written");
                    shapes
                        .lock()
                        .unwrap()
                        .push((ds.version_id(), ds.count_fragments()));
                }
            },
        )],
    )
    .await;
    let s = shapes.lock().unwrap().clone();
    println!(
        "| naive sink: one commit per 8192-row batch ({naive_rows} rows) | | {} | | {} / {} |",
        stats[0].cell(),
        s[0].0,
        s[0].1
    );
}
