//! Data, timing and CPU accounting shared by the benchmark sections.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Date32Array, Float64Array, RecordBatch, RecordBatchIterator, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use lance::Dataset;
use lance::dataset::{WriteMode, WriteParams};
use lance_file::version::LanceFileVersion;

pub(crate) struct Args {
    pub(crate) rows: usize,
    pub(crate) iters: usize,
    pub(crate) dir: PathBuf,
    pub(crate) sections: Vec<String>,
    pub(crate) variant: String,
}

pub(crate) fn args() -> Args {
    let mut out = Args {
        rows: 10_000_000,
        iters: 5,
        dir: PathBuf::from("target/bench-data"),
        sections: Vec::new(),
        variant: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rows" => out.rows = it.next().and_then(|v| v.parse().ok()).expect("--rows N"),
            "--iters" => out.iters = it.next().and_then(|v| v.parse().ok()).expect("--iters N"),
            "--dir" => out.dir = PathBuf::from(it.next().expect("--dir PATH")),
            "--only" => out
                .sections
                .push(it.next().expect("--only read|sessions|insert")),
            _ => {} // cargo bench passes --bench
        }
    }
    out
}

pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

pub(crate) fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("l_quantity", DataType::Float64, false),
        Field::new("l_extendedprice", DataType::Float64, false),
        Field::new("l_discount", DataType::Float64, false),
        Field::new("l_tax", DataType::Float64, false),
        Field::new("l_returnflag", DataType::Utf8, false),
        Field::new("l_linestatus", DataType::Utf8, false),
        Field::new("l_shipdate", DataType::Date32, false),
    ]))
}

/// Rows `start..start + n` of a TPC-H-like lineitem (deterministic).
pub(crate) fn lineitem(start: usize, n: usize) -> RecordBatch {
    let r = |i: usize, c: u64| splitmix((i as u64) << 3 | c);
    let rows = start..start + n;
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 0) % 50 + 1) as f64),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone()
                    .map(|i| 900.0 + (r(i, 1) % 10_410_000) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 2) % 11) as f64 / 100.0),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.clone().map(|i| (r(i, 3) % 9) as f64 / 100.0),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.clone()
                    .map(|i| ["A", "N", "R"][(r(i, 4) % 3) as usize]),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.clone().map(|i| ["F", "O"][(r(i, 5) % 2) as usize]),
            )),
            Arc::new(Date32Array::from_iter_values(
                rows.map(|i| 8036 + (r(i, 6) % 2526) as i32),
            )),
        ],
    )
    .expect("lineitem batch")
}

pub(crate) async fn write_lance(
    uri: &str,
    rows: usize,
    per_file: usize,
    version: LanceFileVersion,
) {
    let chunk = 100_000.min(rows.max(1));
    let batches: Vec<_> = (0..rows)
        .step_by(chunk)
        .map(|s| Ok(lineitem(s, chunk.min(rows - s))))
        .collect();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: per_file,
        data_storage_version: Some(version),
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new(batches, schema()),
        uri,
        Some(params),
    )
    .await
    .expect("write lance");
}

pub(crate) fn exists(path: &Path) -> bool {
    path.join("_versions").is_dir() || path.is_file()
}

/// CPU time (user + system) of this process.
pub(crate) fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 (1-based); after ')' they are 12 and 13 (1-based) → 11, 12.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[derive(Clone, Copy)]
pub(crate) struct Measure {
    pub(crate) wall: Duration,
    pub(crate) cores: f64,
}

pub(crate) async fn measure<F, Fut>(iters: usize, mut f: F) -> Measure
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    f().await; // warm-up
    let mut walls = Vec::with_capacity(iters);
    let cpu0 = cpu_time();
    let total0 = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        f().await;
        walls.push(t.elapsed());
    }
    let total = total0.elapsed();
    let cpu = cpu_time() - cpu0;
    walls.sort();
    Measure {
        wall: walls[walls.len() / 2],
        cores: cpu.as_secs_f64() / total.as_secs_f64().max(1e-9),
    }
}
