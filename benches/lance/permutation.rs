//! **permutation** — permutation plans over the read section's v2.1
//! lineitem table (`--rows`, 10,000,000 by default):
//!
//! * building a plan (`lance_build_permutation`: a 90/10 random split,
//!   shuffled) vs the floor of any build done with Lance directly — scan the
//!   base's row ids with Lance's `Scanner` and `Dataset::write` them with a
//!   split id (no shuffle) — and vs the row-id scan alone (what any build
//!   must read; Lance derives it from fragment metadata, without I/O);
//! * reading a shuffled 1,000,000-row split (`lance_permutation`, three
//!   columns) with one partition (as users get it) and with one per core,
//!   vs Lance's `take_rows` called directly with the same ids in the same
//!   order, and vs a sequential scan of as many rows with Lance's `Scanner`;
//!
//! and the peak heap of each side.

use std::sync::Arc;

use datafusion::prelude::SessionConfig;
use futures::TryStreamExt;
use lance::Dataset;
use lance::dataset::scanner::Scanner;
use lance_file::version::LanceFileVersion;

use crate::common::{Args, Stats, exists, interleaved, ratio, side, side_with_setup, write_lance};
use crate::memory::{Peak, interleaved_peaks};
use crate::search::run;

/// Rows of the split read.
const SPLIT_ROWS: usize = 1_000_000;
/// Columns read.
const COLUMNS: &[&str] = &["l_quantity", "l_extendedprice", "l_shipdate"];

fn context(partitions: usize) -> datafusion::prelude::SessionContext {
    datafusion_lance::lance_session_context(SessionConfig::new().with_target_partitions(partitions))
}

/// Rows a Lance scanner yields.
async fn drain(scanner: &Scanner) -> usize {
    scanner
        .try_into_stream()
        .await
        .expect("stream")
        .try_fold(0, |n, b| async move { Ok(n + b.num_rows()) })
        .await
        .expect("scan")
}

/// The floor of a build done with Lance directly: the base's row ids
/// scanned and written to `target` with a split id (every 10th row in split
/// 1), unshuffled. Returns the rows written.
async fn scan_and_write_ids(base: &Dataset, target: &str) -> usize {
    use arrow::array::{RecordBatch, RecordBatchIterator, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    let mut scanner = base.scan();
    scanner.project::<&str>(&[]).expect("project").with_row_id();
    let ids: Vec<RecordBatch> = scanner
        .try_into_stream()
        .await
        .expect("stream")
        .try_collect()
        .await
        .expect("scan");
    let schema = Arc::new(Schema::new(vec![
        Field::new("row_id", DataType::UInt64, false),
        Field::new("split_id", DataType::UInt64, false),
    ]));
    let mut position = 0u64;
    let batches: Vec<RecordBatch> = ids
        .iter()
        .map(|b| {
            let n = b.num_rows() as u64;
            let split: UInt64Array = (position..position + n)
                .map(|i| u64::from(i % 10 == 0))
                .collect();
            position += n;
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::clone(b.column(0)), Arc::new(split)],
            )
            .expect("batch")
        })
        .collect();
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), Arc::clone(&schema));
    Dataset::write(reader, target, None).await.expect("write");
    position as usize
}

/// The row ids of split 0 of the plan at `plan`, in plan order.
async fn split_ids(plan: &str) -> Vec<u64> {
    let ds = Dataset::open(plan).await.expect("open plan");
    let mut scanner = ds.scan();
    scanner
        .project(&["row_id"])
        .expect("project")
        .filter("split_id = 0")
        .expect("filter")
        .scan_in_order(true);
    let batches: Vec<_> = scanner
        .try_into_stream()
        .await
        .expect("stream")
        .try_collect()
        .await
        .expect("scan");
    batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
                .expect("row ids")
                .values()
                .to_vec()
        })
        .collect()
}

pub(crate) async fn permutation_table(args: &Args) {
    let per_file = args.rows.div_ceil(66).max(1);
    let path = args.dir.join(format!("lineitem-v2.1-{}.lance", args.rows));
    let uri = path.to_string_lossy().to_string();
    if !exists(&path) {
        write_lance(&uri, args.rows, per_file, LanceFileVersion::V2_1).await;
    }
    let base = Arc::new(Dataset::open(&uri).await.expect("open base"));
    build_table(args, &uri, &base).await;
    read_table(args, &uri, &base).await;
}

async fn build_table(args: &Args, uri: &str, base: &Arc<Dataset>) {
    println!(
        "\n## Permutation plans: building a plan over {} rows (v2.1)\n",
        args.rows
    );
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores; peak heap: the most live \
         bytes above the run's start, median (min–max). Each build writes a new plan (the \
         previous one is removed outside the timing). Ratio: time ÷ the time of the floor \
         done with Lance directly (scan the row ids, write them with a split id: every 10th \
         row in split 1; no shuffle, no checks).\n",
        args.iters
    );
    let plans = args.dir.join("permutation-builds");
    let _ = std::fs::remove_dir_all(&plans);
    std::fs::create_dir_all(&plans).expect("plans dir");
    let build = |n: &std::sync::atomic::AtomicUsize| {
        let k = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let previous = plans.join(format!("p{}.lance", k.wrapping_sub(1)));
        let _ = std::fs::remove_dir_all(previous);
        format!(
            "SELECT * FROM lance_build_permutation('{uri}', '{}', 'split=random', \
             'ratios=0.9,0.1', 'seed=1', 'shuffle=true', 'names=train,test')",
            plans.join(format!("p{k}.lance")).display()
        )
    };
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let floor_counter = std::sync::atomic::AtomicUsize::new(0);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let ctx = context(cpus);
    let rows = base.count_rows(None).await.expect("count");
    let mut sides = vec![
        side_with_setup(
            || {
                let statement = build(&counter);
                async move { statement }
            },
            |statement: String| {
                let ctx = ctx.clone();
                async move {
                    assert_eq!(run(&ctx, &statement).await, 2);
                }
            },
        ),
        side_with_setup(
            || {
                let k = floor_counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let previous = plans.join(format!("floor{}.lance", k.wrapping_sub(1)));
                let _ = std::fs::remove_dir_all(previous);
                let target = plans.join(format!("floor{k}.lance"));
                async move { target.to_string_lossy().to_string() }
            },
            |target: String| {
                let base = Arc::clone(base);
                async move {
                    assert_eq!(scan_and_write_ids(&base, &target).await, rows);
                }
            },
        ),
        side(|| {
            let base = Arc::clone(base);
            async move {
                let mut scanner = base.scan();
                scanner.project::<&str>(&[]).expect("project").with_row_id();
                assert_eq!(drain(&scanner).await, rows);
            }
        }),
    ];
    let stats = interleaved(args.iters, &mut sides).await;
    let peaks = interleaved_peaks(args.iters, &mut sides).await;
    let _ = std::fs::remove_dir_all(&plans);
    println!("| side | time | ÷ scan + write | peak heap |");
    println!("|---|---|---|---|");
    for (label, (s, p)) in [
        "datafusion-lance: lance_build_permutation (SQL; 90/10, shuffled)",
        "Lance: Scanner of the row ids + Dataset::write of (row_id, split_id), no shuffle",
        "Lance Scanner: the base's row ids only",
    ]
    .iter()
    .zip(stats.iter().zip(&peaks))
    {
        println!(
            "| {label} | {} | {} | {} |",
            s.cell(),
            ratio(s, &stats[1]),
            p.cell()
        );
    }
}

async fn read_table(args: &Args, uri: &str, base: &Arc<Dataset>) {
    let split = SPLIT_ROWS.min(args.rows / 2).max(1);
    let plan_path = args
        .dir
        .join(format!("permutation-{}-{split}.lance", args.rows));
    let plan = plan_path.to_string_lossy().to_string();
    if !exists(&plan_path) {
        let ctx = context(2);
        run(
            &ctx,
            &format!(
                "SELECT * FROM lance_build_permutation('{uri}', '{plan}', 'split=random', \
                 'counts={split}', 'seed=5', 'shuffle=true')"
            ),
        )
        .await;
    }
    let ids = Arc::new(split_ids(&plan).await);
    assert_eq!(ids.len(), split);
    println!(
        "\n## Permutation plans: reading a shuffled {split}-row split of {} rows ({} columns)\n",
        args.rows,
        COLUMNS.len()
    );
    println!(
        "Each cell: median of {} interleaved runs (min–max) / cores, and rows/s at the median; \
         peak heap as above. Ratio: time ÷ `take_rows`'s time. `take_rows` gets the split's ids \
         (read beforehand, outside the timing) in one call; the scan reads the first {split} \
         rows of the base in order.\n",
        args.iters
    );
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let columns = COLUMNS.join(", ");
    let read = |partitions: usize| {
        let ctx = context(cpus);
        let statement = format!(
            "SELECT {columns} FROM lance_permutation('{plan}', 0, 'partitions={partitions}')"
        );
        side(move || {
            let ctx = ctx.clone();
            let statement = statement.clone();
            async move {
                assert_eq!(run(&ctx, &statement).await, split);
            }
        })
    };
    let take = {
        let base = Arc::clone(base);
        let ids = Arc::clone(&ids);
        side(move || {
            let base = Arc::clone(&base);
            let ids = Arc::clone(&ids);
            async move {
                let projection = base.schema().project(COLUMNS).expect("columns");
                let batch = base.take_rows(&ids, projection).await.expect("take_rows");
                assert_eq!(batch.num_rows(), split);
            }
        })
    };
    let scan = {
        let base = Arc::clone(base);
        side(move || {
            let base = Arc::clone(&base);
            async move {
                let mut scanner = base.scan();
                scanner
                    .project(COLUMNS)
                    .expect("project")
                    .limit(Some(split as i64), None)
                    .expect("limit");
                assert_eq!(drain(&scanner).await, split);
            }
        })
    };
    let mut sides = vec![read(1), read(cpus), take, scan];
    let stats = interleaved(args.iters, &mut sides).await;
    let peaks = interleaved_peaks(args.iters, &mut sides).await;
    println!("| side | time | rows/s | ÷ take_rows | peak heap |");
    println!("|---|---|---|---|---|");
    let labels = [
        "datafusion-lance: lance_permutation (1 partition, the default)".to_string(),
        format!("datafusion-lance: lance_permutation ('partitions={cpus}')"),
        "Lance Dataset::take_rows (same ids, one call)".to_string(),
        "Lance Scanner: as many rows in order".to_string(),
    ];
    for (label, (s, p)) in labels.iter().zip(stats.iter().zip(&peaks)) {
        row(label, s, &stats[2], p, split);
    }
}

fn row(label: &str, s: &Stats, take: &Stats, p: &Peak, rows: usize) {
    println!(
        "| {label} | {} | {:.2} M | {} | {} |",
        s.cell(),
        rows as f64 / s.median.as_secs_f64() / 1e6,
        ratio(s, take),
        p.cell()
    );
}
