//! **fragments** — 1,000,000 rows with `id` ascending, stored as 100, 1,000,
//! 10,000, 20,000 and 100,000 fragments (`--fragments 100,1000` to choose):
//! for each, this crate vs Lance's own `LanceTableProvider` (unordered and
//! ordered) on registration + planning, `count(*)`, a full scan and a 0.1%
//! selective scan without an index and with a ZONEMAP and a BTREE index on
//! `id`; and a 1-row INSERT and DELETE vs Lance's `InsertBuilder` /
//! `DeleteBuilder`; the peak heap of each query. Prints the tables and
//! writes the log-log chart `docs/fragments.svg` (`--svg PATH` elsewhere),
//! drawn here with no plotting dependency.
//!
//! Each table's versions: 1 the rows, 2 with a ZONEMAP index `z` on `id`,
//! 3 without it, 4 with a BTREE index `b` on `id`; the reads pin 1, 2 or 4,
//! the INSERT/DELETE pairs add versions after them and leave the rows as
//! they were (the inserted fragment is deleted whole).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, RecordBatchIterator};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::prelude::SessionContext;
use lance::Dataset;
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::session::Session;

use crate::common::{Args, Stats, exists, interleaved, ratio, side};
use crate::memory::interleaved_peaks;
use crate::read::{config, run_sql};

const ROWS: usize = 1_000_000;

/// The queries of the section, in the order of the table and the chart, and
/// the version each reads (see the module docs).
const QUERIES: &[(&str, &str, u64)] = &[
    ("count(*)", "SELECT count(*) FROM t", PLAIN),
    ("full scan", "SELECT sum(v) FROM t", PLAIN),
    ("id < 1000", "SELECT sum(v) FROM t WHERE id < 1000", PLAIN),
    (
        "id < 1000, ZONEMAP",
        "SELECT sum(v) FROM t WHERE id < 1000",
        ZONEMAP,
    ),
    (
        "id < 1000, BTREE",
        "SELECT sum(v) FROM t WHERE id < 1000",
        BTREE,
    ),
];

/// The versions of every table (see the module docs).
const PLAIN: u64 = 1;
const ZONEMAP: u64 = 2;
const BTREE: u64 = 4;

/// The sides of every comparison, in the order of the table's columns.
const SIDES: &[&str] = &["datafusion-lance", "Lance, unordered", "Lance, ordered"];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]))
}

/// Creates (once) the table of `ROWS` rows in `fragments` fragments.
async fn table(args: &Args, fragments: usize) -> String {
    let path = args.dir.join(format!("fragments-{fragments}.lance"));
    let uri = path.to_string_lossy().to_string();
    if exists(&path) {
        return uri;
    }
    let per_file = ROWS / fragments;
    let chunk = 100_000.max(per_file);
    let batches: Vec<_> = (0..ROWS)
        .step_by(chunk)
        .map(|start| {
            let ids = start as i64..(start + chunk.min(ROWS - start)) as i64;
            RecordBatch::try_new(
                schema(),
                vec![
                    Arc::new(Int64Array::from_iter_values(ids.clone())),
                    Arc::new(Int64Array::from_iter_values(ids.map(|i| i % 1000))),
                ],
            )
        })
        .collect();
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: per_file,
        max_rows_per_group: per_file.min(1024),
        ..Default::default()
    };
    Dataset::write(
        RecordBatchIterator::new(batches, schema()),
        &uri,
        Some(params),
    )
    .await
    .expect("write the fragments table");
    let ds = Dataset::open(&uri).await.expect("open");
    assert_eq!(ds.get_fragments().len(), fragments, "{uri}");
    uri
}

/// Adds (once) versions 2–4 of the module docs to the table at `uri`.
async fn indexes(uri: &str) {
    use lance::index::DatasetIndexExt;
    use lance_index::IndexType;
    use lance_index::scalar::{BuiltinIndexType, ScalarIndexParams};
    let mut ds = Dataset::open(uri).await.expect("open");
    if ds.version().version >= BTREE {
        return;
    }
    assert_eq!(ds.version().version, PLAIN, "{uri}: unexpected versions");
    let kinds = [
        ("z", IndexType::ZoneMap, BuiltinIndexType::ZoneMap),
        ("b", IndexType::BTree, BuiltinIndexType::BTree),
    ];
    for (name, kind, builtin) in kinds {
        if name == "b" {
            ds.drop_index("z").await.expect("drop the ZONEMAP index");
        }
        let params = ScalarIndexParams::for_builtin(builtin);
        ds.create_index(&["id"], kind, Some(name.into()), &params, false)
            .await
            .unwrap_or_else(|e| panic!("{kind} index on {uri}: {e}"));
    }
    assert_eq!(ds.version().version, BTREE, "{uri}");
}

/// Ours as a user gets it: a Lance session context, the table registered by
/// SQL through the process-wide shared session, at `version` (latest if
/// `None`).
async fn ours(uri: &str, version: Option<u64>) -> SessionContext {
    let ctx = datafusion_lance::lance_session_context(config(cpus()));
    let options = version
        .map(|v| format!(" OPTIONS ('lance.version' '{v}')"))
        .unwrap_or_default();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'{options}"
    ))
    .await
    .expect("register")
    .collect()
    .await
    .expect("register");
    ctx
}

/// Lance's own provider over version `version` of a dataset opened through
/// `session`.
async fn lance_own(
    uri: &str,
    session: &Arc<Session>,
    version: u64,
    ordered: bool,
) -> SessionContext {
    let ds = DatasetBuilder::from_uri(uri)
        .with_session(Arc::clone(session))
        .with_version(version)
        .load()
        .await
        .expect("open");
    let ctx = SessionContext::new_with_config(config(cpus()));
    ctx.register_table(
        "t",
        Arc::new(lance::datafusion::LanceTableProvider::new_with_ordering(
            Arc::new(ds),
            false,
            false,
            ordered,
        )),
    )
    .expect("register");
    ctx
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Registration and planning of `SELECT sum(v) FROM t`, warm (the manifest
/// already read once by the same session).
async fn plan(ctx: SessionContext) {
    ctx.sql("SELECT sum(v) FROM t")
        .await
        .expect("plan")
        .create_physical_plan()
        .await
        .expect("physical plan");
}

pub(crate) async fn fragments_table(args: &Args) {
    let counts = if args.fragments.is_empty() {
        vec![100, 1_000, 10_000, 20_000, 100_000]
    } else {
        args.fragments.clone()
    };
    println!(
        "\n## Cost per fragment: {ROWS} rows (`id` ascending, `v` = id % 1000) in 100 to \
         100,000 fragments\n\n\
         datafusion-lance as users get it (`CREATE EXTERNAL TABLE`, the shared Lance session) vs \
         Lance's own `LanceTableProvider` unordered (`new_with_ordering(.., false)`) and ordered \
         (as users get it), each over a dataset opened through one Lance session kept across runs. \
         \"register + plan\" opens the table and plans `SELECT sum(v) FROM t` (warm: the session \
         has read the manifest once); the queries run on a table registered once, at the \
         version without an index or with a ZONEMAP / BTREE index on `id`. The 1-row INSERT and \
         DELETE (of that row) run on the latest version through `lance_sql` vs Lance's \
         `InsertBuilder` / `DeleteBuilder` (the Lance column). \
         Median of {} interleaved runs (min–max) / cores; ratio: ours ÷ Lance unordered.\n",
        args.iters
    );
    println!("| fragments | query | {} | ratio |", SIDES.join(" | "));
    println!("|---|---|---|---|---|---|");
    let mut chart = Vec::new();
    let mut memory = Vec::new();
    let session = Arc::new(Session::default());
    for &fragments in &counts {
        let uri = table(args, fragments).await;
        indexes(&uri).await;
        let stats = interleaved(
            args.iters,
            &mut [
                side(|| {
                    let uri = uri.clone();
                    async move { plan(ours(&uri, Some(PLAIN)).await).await }
                }),
                side(|| {
                    let (uri, session) = (uri.clone(), Arc::clone(&session));
                    async move { plan(lance_own(&uri, &session, PLAIN, false).await).await }
                }),
                side(|| {
                    let (uri, session) = (uri.clone(), Arc::clone(&session));
                    async move { plan(lance_own(&uri, &session, PLAIN, true).await).await }
                }),
            ],
        )
        .await;
        row(fragments, "register + plan", &stats);
        chart.push(("register + plan", fragments, stats));

        for &(name, sql, version) in QUERIES {
            let contexts = [
                ours(&uri, Some(version)).await,
                lance_own(&uri, &session, version, false).await,
                lance_own(&uri, &session, version, true).await,
            ];
            let mut sides: Vec<_> = contexts
                .iter()
                .map(|ctx| {
                    side(move || async move {
                        run_sql(ctx, sql).await;
                    })
                })
                .collect();
            let stats = interleaved(args.iters, &mut sides).await;
            let peaks = interleaved_peaks(args.iters, &mut sides).await;
            drop(sides);
            row(fragments, name, &stats);
            memory.push((fragments, name, peaks));
            chart.push((name, fragments, stats));
        }
        for (name, stats) in one_row_writes(args, &uri, &session).await {
            println!(
                "| {fragments} | {name} | {} | {} | — | {} |",
                stats[0].cell(),
                stats[1].cell(),
                ratio(&stats[0], &stats[1])
            );
        }
    }
    growth(&counts, &chart);
    println!(
        "\nPeak heap of each query: the most live heap bytes above where the run started \
         (the bench's allocator counts them during separate interleaved runs, {} each; \
         median (min–max)); ratio: ours ÷ Lance unordered.\n",
        args.iters
    );
    println!("| fragments | query | {} | ratio |", SIDES.join(" | "));
    println!("|---|---|---|---|---|---|");
    for (fragments, name, peaks) in &memory {
        println!(
            "| {fragments} | {name} | {} | {} | {} | {:.2}× |",
            peaks[0].cell(),
            peaks[1].cell(),
            peaks[2].cell(),
            peaks[0].median as f64 / peaks[1].median.max(1) as f64
        );
    }
    let svg = args
        .svg
        .clone()
        .unwrap_or_else(|| Path::new("docs/fragments.svg").to_path_buf());
    if let Some(parent) = svg.parent() {
        std::fs::create_dir_all(parent).expect("chart directory");
    }
    std::fs::write(&svg, draw(&chart)).expect("write the chart");
    println!("\nChart: {}", svg.display());
}

/// A 1-row INSERT and a 1-row DELETE of that row through SQL, and the same
/// through Lance's `InsertBuilder` / `DeleteBuilder` on the latest version
/// (opened through `session`), interleaved: (name, [ours, Lance]).
async fn one_row_writes(
    args: &Args,
    uri: &str,
    session: &Arc<Session>,
) -> Vec<(&'static str, [Stats; 2])> {
    use datafusion_lance::LanceSessionContextExt;
    use lance::dataset::{DeleteBuilder, InsertBuilder};
    let ctx = ours(uri, None).await;
    let sql = |statement: &'static str| {
        let ctx = &ctx;
        side(move || async move {
            ctx.lance_sql(statement)
                .await
                .expect(statement)
                .collect()
                .await
                .expect(statement);
        })
    };
    let latest = || async {
        let ds = DatasetBuilder::from_uri(uri)
            .with_session(Arc::clone(session))
            .load()
            .await
            .expect("open");
        Arc::new(ds)
    };
    let append = WriteParams {
        mode: WriteMode::Append,
        ..Default::default()
    };
    let one = || {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(vec![-1])),
                Arc::new(Int64Array::from(vec![0])),
            ],
        )
        .expect("row")
    };
    let mut sides = [
        sql("INSERT INTO t VALUES (-1, 0)"),
        sql("DELETE FROM t WHERE id = -1"),
        side(|| async {
            InsertBuilder::new(latest().await)
                .with_params(&append)
                .execute(vec![one()])
                .await
                .expect("InsertBuilder");
        }),
        side(|| async {
            DeleteBuilder::new(latest().await, "id = -1")
                .execute()
                .await
                .expect("DeleteBuilder");
        }),
    ];
    let stats = interleaved(args.iters, &mut sides).await;
    drop(sides);
    let ds = latest().await;
    assert_eq!(ds.count_rows(None).await.expect("count"), ROWS, "{uri}");
    let Ok([insert, delete, lance_insert, lance_delete]) = <[Stats; 4]>::try_from(stats) else {
        unreachable!("four sides")
    };
    vec![
        ("1-row INSERT", [insert, lance_insert]),
        ("1-row DELETE", [delete, lance_delete]),
    ]
}

fn row(fragments: usize, query: &str, stats: &[Stats]) {
    println!(
        "| {fragments} | {query} | {} | {} | {} | {} |",
        stats[0].cell(),
        stats[1].cell(),
        stats[2].cell(),
        ratio(&stats[0], &stats[1])
    );
}

/// How our time grows with the fragment count: each query's median ÷ its
/// median at the smallest count, from unrounded times (the table's cells are
/// rounded to 1 ms, too coarse for the few-ms indexed queries).
fn growth(counts: &[usize], chart: &[(&str, usize, Vec<Stats>)]) {
    let Some(&first) = counts.first() else {
        return;
    };
    println!(
        "\nHow our time grows: median ÷ our median at {first} fragments (unrounded; \
         each count's runs are interleaved with the other sides, not with other counts).\n"
    );
    println!(
        "| query | {} |",
        counts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(counts.len()));
    for name in query_names(chart) {
        let median = |count: usize| {
            chart
                .iter()
                .find(|(n, c, _)| *n == name && *c == count)
                .map(|(_, _, stats)| stats[0].median.as_secs_f64())
        };
        let Some(base) = median(first) else {
            continue;
        };
        let cells: Vec<String> = counts
            .iter()
            .map(|&c| median(c).map_or("—".into(), |m| format!("{:.1}×", m / base.max(1e-12))))
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}

/// The queries of the chart's points, in order of first appearance.
fn query_names<'a>(points: &[(&'a str, usize, Vec<Stats>)]) -> Vec<&'a str> {
    let mut names = Vec::new();
    for (name, _, _) in points {
        if !names.contains(name) {
            names.push(*name);
        }
    }
    names
}

/// One log-log panel per query: median seconds against fragment count, a
/// line per side, min–max as a whisker.
fn draw(points: &[(&str, usize, Vec<Stats>)]) -> String {
    const PANEL: (f64, f64) = (300.0, 230.0);
    const MARGIN: (f64, f64, f64, f64) = (58.0, 16.0, 30.0, 40.0); // left, right, top, bottom
    const COLORS: &[&str] = &["#d62728", "#1f77b4", "#7f7f7f"];
    let panels = query_names(points);
    let secs = |d: std::time::Duration| d.as_secs_f64().max(1e-4);
    let (xs, ys): (Vec<f64>, Vec<f64>) = points
        .iter()
        .flat_map(|(_, f, stats)| {
            stats
                .iter()
                .flat_map(move |s| [(*f as f64, secs(s.min)), (*f as f64, secs(s.max))])
        })
        .unzip();
    let bounds = |v: &[f64]| {
        let lo = v
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min)
            .log10()
            .floor();
        let hi = v.iter().cloned().fold(0.0, f64::max).log10().ceil();
        (lo, if hi > lo { hi } else { lo + 1.0 })
    };
    let (x0, x1) = bounds(&xs);
    let (y0, y1) = bounds(&ys);
    let width = PANEL.0 * panels.len() as f64;
    let height = PANEL.1 + 34.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    for (p, name) in panels.iter().enumerate() {
        let left = p as f64 * PANEL.0;
        let (pw, ph) = (PANEL.0 - MARGIN.0 - MARGIN.1, PANEL.1 - MARGIN.2 - MARGIN.3);
        let x = |f: f64| left + MARGIN.0 + (f.log10() - x0) / (x1 - x0) * pw;
        let y = |s: f64| MARGIN.2 + (1.0 - (s.log10() - y0) / (y1 - y0)) * ph;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{name}</text>\n\
             <rect x=\"{}\" y=\"{}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#999\"/>",
            left + MARGIN.0 + pw / 2.0,
            left + MARGIN.0,
            MARGIN.2
        );
        for e in x0 as i32..=x1 as i32 {
            let f = 10f64.powi(e);
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x(f),
                MARGIN.2 + ph + 14.0,
                f as u64
            );
        }
        for e in y0 as i32..=y1 as i32 {
            let s = 10f64.powi(e);
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\n\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                left + MARGIN.0,
                left + MARGIN.0 + pw,
                y(s),
                y(s),
                left + MARGIN.0 - 4.0,
                y(s) + 4.0,
                if e < 0 {
                    format!("{:.*} s", (-e) as usize, s)
                } else {
                    format!("{s} s")
                }
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">fragments</text>",
            left + MARGIN.0 + pw / 2.0,
            MARGIN.2 + ph + 28.0
        );
        for (s, color) in COLORS.iter().enumerate() {
            let series: Vec<(f64, &Stats)> = points
                .iter()
                .filter(|(n, _, _)| n == name)
                .map(|(_, f, stats)| (*f as f64, &stats[s]))
                .collect();
            let line: Vec<String> = series
                .iter()
                .map(|(f, st)| format!("{:.1},{:.1}", x(*f), y(secs(st.median))))
                .collect();
            let _ = writeln!(
                out,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
                line.join(" ")
            );
            for (f, st) in &series {
                let _ = writeln!(
                    out,
                    "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{color}\"/>\n\
                     <circle cx=\"{0:.1}\" cy=\"{3:.1}\" r=\"3\" fill=\"{color}\"/>",
                    x(*f),
                    y(secs(st.min)),
                    y(secs(st.max)),
                    y(secs(st.median))
                );
            }
        }
    }
    for (s, (label, color)) in SIDES.iter().zip(COLORS).enumerate() {
        let lx = MARGIN.0 + s as f64 * 170.0;
        let _ = writeln!(
            out,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{color}\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{label}</text>",
            height - 22.0,
            lx + 16.0,
            height - 12.0
        );
    }
    out.push_str("</svg>\n");
    out
}
