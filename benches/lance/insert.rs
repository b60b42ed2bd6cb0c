//! Insert table: `INSERT INTO ... SELECT` through SQL (parallel writers, one
//! commit) vs Lance's `InsertBuilder` vs a naive sink committing per batch.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{RecordBatch, RecordBatchIterator};
use datafusion::datasource::MemTable;
use datafusion_lance::config::DEFAULT_STORAGE_VERSION;
use lance::Dataset;
use lance::dataset::{InsertBuilder, WriteMode, WriteParams};

use crate::common::{Args, cpu_time, lineitem, schema};
use crate::read::{config, run_sql};

fn versions_and_fragments(ds: &Dataset) -> (u64, usize) {
    (ds.version_id(), ds.count_fragments())
}

struct Row {
    label: String,
    rows: usize,
    secs: f64,
    cores: f64,
    versions: u64,
    fragments: usize,
}

async fn timed<F: Future<Output = (u64, usize)>>(label: &str, rows: usize, f: F) -> Row {
    let cpu0 = cpu_time();
    let t = Instant::now();
    let (versions, fragments) = f.await;
    let secs = t.elapsed().as_secs_f64();
    Row {
        label: label.to_string(),
        rows,
        secs,
        cores: (cpu_time() - cpu0).as_secs_f64() / secs,
        versions,
        fragments,
    }
}

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
    let dir = tempfile::Builder::new()
        .prefix("insert-bench-")
        .tempdir_in(&args.dir)
        .expect("dir");
    let path = |name: &str| dir.path().join(name).to_string_lossy().to_string();
    println!("\n## INSERT: {rows} rows from a 4-partition source, into an empty table\n");
    println!("| writer | rows | time | rows/s | cores | versions created | fragments |");
    println!("|---|---|---|---|---|---|---|");
    let mut results = Vec::new();

    // 1. SQL: INSERT INTO t SELECT * FROM source (4 writers, one commit).
    {
        let uri = path("sql.lance");
        let ctx = datafusion_lance::lance_session_context(config(4));
        ctx.register_table(
            "source",
            Arc::new(MemTable::try_new(schema(), partitions.clone()).expect("memtable")),
        )
        .expect("register");
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE t (l_quantity DOUBLE NOT NULL, l_extendedprice DOUBLE NOT NULL, \
             l_discount DOUBLE NOT NULL, l_tax DOUBLE NOT NULL, l_returnflag VARCHAR NOT NULL, \
             l_linestatus VARCHAR NOT NULL, l_shipdate DATE NOT NULL) STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .expect("create");
        results.push(
            timed(
                "datafusion-lance: INSERT INTO t SELECT (SQL)",
                rows,
                async {
                    run_sql(&ctx, "INSERT INTO t SELECT * FROM source").await;
                    let ds = Dataset::open(&uri).await.expect("open");
                    let (v, f) = versions_and_fragments(&ds);
                    (v - 1, f)
                },
            )
            .await,
        );
    }

    // 2. Lance's InsertBuilder on the same batches (one stream).
    {
        let uri = path("builder.lance");
        results.push(
            timed("Lance InsertBuilder::execute_stream", rows, async {
                let params = WriteParams {
                    mode: WriteMode::Create,
                    data_storage_version: Some(DEFAULT_STORAGE_VERSION),
                    ..Default::default()
                };
                let reader = RecordBatchIterator::new(all.clone().into_iter().map(Ok), schema());
                let ds = InsertBuilder::new(uri.as_str())
                    .with_params(&params)
                    .execute_stream(
                        Box::new(reader) as Box<dyn arrow::array::RecordBatchReader + Send>
                    )
                    .await
                    .expect("insert");
                versions_and_fragments(&ds)
            })
            .await,
        );
    }

    // 3. Naive sink: one commit per batch (first 1M rows only: it is slow).
    {
        let uri = path("naive.lance");
        let naive_rows = rows.min(1_000_000);
        let batches: Vec<RecordBatch> = all
            .iter()
            .scan(0usize, |seen, b| {
                *seen += b.num_rows();
                (*seen <= naive_rows).then(|| b.clone())
            })
            .collect();
        let n = batches.iter().map(|b| b.num_rows()).sum();
        results.push(
            timed(
                "naive sink: one commit per 8192-row batch (first 1M rows only)",
                n,
                async {
                    let mut ds: Option<Dataset> = None;
                    for b in batches {
                        let mode = if ds.is_none() {
                            WriteMode::Create
                        } else {
                            WriteMode::Append
                        };
                        let params = WriteParams {
                            mode,
                            ..Default::default()
                        };
                        let reader = RecordBatchIterator::new([Ok(b)], schema());
                        ds = Some(
                            Dataset::write(reader, uri.as_str(), Some(params))
                                .await
                                .expect("write"),
                        );
                    }
                    versions_and_fragments(ds.as_ref().expect("written"))
                },
            )
            .await,
        );
    }

    for r in &results {
        println!(
            "| {} | {} | {:.2} s | {:.2} M | {:.1} | {} | {} |",
            r.label,
            r.rows,
            r.secs,
            r.rows as f64 / r.secs / 1e6,
            r.cores,
            r.versions,
            r.fragments
        );
    }
    let (sql, builder) = (&results[0], &results[1]);
    println!(
        "\nSQL INSERT throughput vs InsertBuilder: {:.2}×",
        (sql.rows as f64 / sql.secs) / (builder.rows as f64 / builder.secs)
    );
}
