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
    /// Competing-append rates (commits/s) for the contention section.
    pub(crate) rates: Vec<u32>,
    /// `(lance.commit_max_retries, lance.commit_retry_timeout_ms)` for the
    /// contention section instead of the defaults.
    pub(crate) commit_budget: Option<(u32, u64)>,
    /// Fragment counts for the fragments section (default 100 to 100,000).
    pub(crate) fragments: Vec<usize>,
    /// Where the fragments section writes its chart.
    pub(crate) svg: Option<PathBuf>,
}

pub(crate) fn args() -> Args {
    let mut out = Args {
        rows: 10_000_000,
        iters: 5,
        rates: Vec::new(),
        commit_budget: None,
        fragments: Vec::new(),
        svg: None,
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
            "--only" => out.sections.push(it.next().expect(
                "--only read|sessions|insert|upsert|dml|contention|plans|cluster|search|catalog|fragments|cloud|permutation|statements",
            )),
            "--variant" => out.variant = it.next().expect("--variant NAME"),
            "--commit-budget" => {
                let value = it.next().expect("--commit-budget RETRIES,TIMEOUT_MS");
                let (r, t) = value.split_once(',').expect("RETRIES,TIMEOUT_MS");
                out.commit_budget = Some((r.parse().expect("retries"), t.parse().expect("ms")));
            }
            "--svg" => out.svg = Some(PathBuf::from(it.next().expect("--svg PATH"))),
            "--fragments" => {
                out.fragments = it
                    .next()
                    .expect("--fragments 100,1000")
                    .split(',')
                    .map(|f| f.trim().parse().expect("a fragment count"))
                    .collect()
            }
            "--rates" => {
                out.rates = it
                    .next()
                    .expect("--rates 10,20,40")
                    .split(',')
                    .map(|r| r.trim().parse().expect("a rate"))
                    .collect()
            }
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
    write_lance_as(uri, rows, per_file, version, schema()).await
}

/// [`write_lance`] with the lineitem schema as given (the same columns; its
/// field metadata chooses Lance's encodings per column).
pub(crate) async fn write_lance_as(
    uri: &str,
    rows: usize,
    per_file: usize,
    version: LanceFileVersion,
    schema: SchemaRef,
) {
    let chunk = 100_000.min(rows.max(1));
    let batches: Vec<_> = (0..rows)
        .step_by(chunk)
        .map(|s| lineitem(s, chunk.min(rows - s)).with_schema(Arc::clone(&schema)))
        .collect();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: per_file,
        data_storage_version: Some(version),
        ..Default::default()
    };
    Dataset::write(RecordBatchIterator::new(batches, schema), uri, Some(params))
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

/// The measured work of one run.
pub(crate) type Run<'a> = futures::future::BoxFuture<'a, ()>;

/// One side of a comparison: each call prepares a run (untimed) and returns
/// the work to time.
pub(crate) type Side<'a> = Box<dyn FnMut() -> futures::future::BoxFuture<'a, Run<'a>> + 'a>;

/// A side with nothing to prepare.
pub(crate) fn side<'a, F, Fut>(mut f: F) -> Side<'a>
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = ()> + Send + 'a,
{
    Box::new(move || {
        let run: Run<'a> = Box::pin(f());
        Box::pin(std::future::ready(run))
    })
}

/// A side whose runs need preparing first (outside the timing): `setup`
/// yields what `run` consumes.
pub(crate) fn side_with_setup<'a, S, Setup, SetupFut, Body, BodyFut>(
    mut setup: Setup,
    body: Body,
) -> Side<'a>
where
    S: Send + 'a,
    Setup: FnMut() -> SetupFut + 'a,
    SetupFut: Future<Output = S> + Send + 'a,
    Body: Fn(S) -> BodyFut + Clone + Send + 'a,
    BodyFut: Future<Output = ()> + Send + 'a,
{
    Box::new(move || {
        use futures::FutureExt;
        let body = body.clone();
        Box::pin(setup().map(move |state| -> Run<'a> { Box::pin(body(state)) }))
    })
}

/// Timings of one side over its runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stats {
    pub(crate) median: Duration,
    pub(crate) min: Duration,
    pub(crate) max: Duration,
    /// CPU time ÷ wall time over the side's runs.
    pub(crate) cores: f64,
}

impl Stats {
    pub(crate) fn from_runs(mut walls: Vec<Duration>, cpu: Duration) -> Self {
        walls.sort();
        let total: Duration = walls.iter().sum();
        Self {
            median: walls[walls.len() / 2],
            min: walls[0],
            max: walls[walls.len() - 1],
            cores: cpu.as_secs_f64() / total.as_secs_f64().max(1e-9),
        }
    }

    /// `0.412 s (0.401–0.430) / 1.9 cores`
    pub(crate) fn cell(&self) -> String {
        format!(
            "{:.3} s ({:.3}–{:.3}) / {:.1}",
            self.median.as_secs_f64(),
            self.min.as_secs_f64(),
            self.max.as_secs_f64(),
            self.cores
        )
    }

    /// [`Stats::cell`] in milliseconds, for runs of a few milliseconds.
    pub(crate) fn cell_ms(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "{:.2} ms ({:.2}–{:.2}) / {:.1}",
            ms(self.median),
            ms(self.min),
            ms(self.max),
            self.cores
        )
    }
}

/// `ours ÷ baseline` of the medians, with the spread of the run-by-run
/// extremes (min ÷ max … max ÷ min): below 1 means faster than the baseline.
pub(crate) fn ratio(ours: &Stats, baseline: &Stats) -> String {
    let r = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-12);
    format!(
        "{:.2}× ({:.2}–{:.2})",
        r(ours.median, baseline.median),
        r(ours.min, baseline.max),
        r(ours.max, baseline.min)
    )
}

/// Runs every side once to warm it, then `iters` rounds in which each side
/// runs once, in turn, the order reversed every other round (A B C, C B A,
/// A B C, ...): slow drifts of the machine hit every side alike, and no side
/// always runs right after the same other one (a side that evicts the
/// caches would otherwise always slow down the side after it). Preparation
/// is not timed. Returns each side's [`Stats`].
pub(crate) async fn interleaved(iters: usize, sides: &mut [Side<'_>]) -> Vec<Stats> {
    for side in sides.iter_mut() {
        side().await.await;
    }
    let mut walls = vec![Vec::with_capacity(iters); sides.len()];
    let mut cpu = vec![Duration::ZERO; sides.len()];
    for round in 0..iters.max(1) {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..sides.len()).collect()
        } else {
            (0..sides.len()).rev().collect()
        };
        for i in order {
            let side = &mut sides[i];
            let run = side().await;
            let (c, t) = (cpu_time(), Instant::now());
            run.await;
            walls[i].push(t.elapsed());
            cpu[i] += cpu_time().saturating_sub(c);
        }
    }
    walls
        .into_iter()
        .zip(cpu)
        .map(|(w, c)| Stats::from_runs(w, c))
        .collect()
}
