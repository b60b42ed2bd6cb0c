//! sqllogictest runner for datafusion-lance.
//!
//! ```text
//! cargo test --test sqllogictests                  # every file
//! cargo test --test sqllogictests -- scan/filter   # files whose path contains "scan/filter"
//! cargo test --test sqllogictests -- --complete    # rewrite expected output
//! ```
//!
//! Each `.slt` file gets a fresh `SessionContext` (target_partitions = 4,
//! information_schema on, its own Lance session), a fresh scratch directory
//! holding generated fixtures (see `tests/common/fixtures.rs`), and may write
//! `__SCRATCH__` for that directory; output and errors show it as `__SCRATCH__`.
//! Files under `cloud/` also get a fake LanceDB Cloud service
//! (`tests/common/fake_cloud.rs`) serving the `numbers`, `docs` and
//! `indexed` fixtures as tables of those names; they write `__CLOUD__` for
//! its URL.

#[path = "../tests/common/fake_cloud.rs"]
mod fake_cloud;
#[path = "../tests/common/fixtures.rs"]
mod fixtures;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::error::DataFusionError;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::options::CacheBudgets;
use datafusion_lance::{LanceSessionCache, LanceSessionContextExt};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};

const SCRATCH: &str = "__SCRATCH__";
const CLOUD: &str = "__CLOUD__";

/// An error whose text has the scratch directory replaced by `__SCRATCH__`.
#[derive(Debug)]
struct SltError(String);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SltError {}

struct LanceDb {
    ctx: SessionContext,
    scratch: String,
    /// The fake LanceDB Cloud service's URL, for files under `cloud/`.
    cloud: Option<String>,
}

impl LanceDb {
    fn hide_scratch(&self, s: &str) -> String {
        let s = hide_digests(&s.replace(&self.scratch, SCRATCH));
        match &self.cloud {
            Some(url) => s.replace(url, CLOUD),
            None => s,
        }
    }

    async fn run_sql(&self, sql: &str) -> Result<Vec<RecordBatch>, DataFusionError> {
        let mut sql = sql.replace(SCRATCH, &self.scratch);
        if let Some(url) = &self.cloud {
            sql = sql.replace(CLOUD, url);
        }
        self.ctx.lance_sql(&sql).await?.collect().await
    }
}

/// A permutation plan's identity ends in a digest of its full locations,
/// which differ from run to run: shown as `<digest>`.
fn hide_digests(s: &str) -> String {
    const MARK: &str = "permutation:v1:";
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(MARK) {
        let token_end = rest[at..]
            .find(|c: char| c.is_whitespace() || c == '\'' || c == ',')
            .map_or(rest.len(), |n| at + n);
        let token = &rest[..token_end];
        let digest = token.len().saturating_sub(16);
        if token_end - at > MARK.len() + 17
            && token[digest..].chars().all(|c| c.is_ascii_hexdigit())
            && token[..digest].ends_with(':')
        {
            out.push_str(&token[..digest]);
            out.push_str("<digest>");
        } else {
            out.push_str(token);
        }
        rest = &rest[token_end..];
    }
    out.push_str(rest);
    out
}

fn column_type(t: &DataType) -> DefaultColumnType {
    if t.is_integer() {
        DefaultColumnType::Integer
    } else if t.is_floating() || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..)) {
        DefaultColumnType::FloatingPoint
    } else {
        DefaultColumnType::Text
    }
}

#[async_trait]
impl AsyncDB for LanceDb {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let batches = self
            .run_sql(sql)
            .await
            .map_err(|e| SltError(self.hide_scratch(&e.strip_backtrace())))?;
        let Some(first) = batches.first() else {
            return Ok(DBOutput::StatementComplete(0));
        };
        let schema = first.schema();
        if schema.fields().is_empty() {
            return Ok(DBOutput::StatementComplete(0));
        }
        let types = schema
            .fields()
            .iter()
            .map(|f| column_type(f.data_type()))
            .collect();
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in &batches {
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| SltError(e.to_string()))?;
            for row in 0..batch.num_rows() {
                let cells: Vec<String> = formatters
                    .iter()
                    .map(|f| {
                        let s = self.hide_scratch(&f.value(row).to_string());
                        if s.is_empty() {
                            "(empty)".to_string()
                        } else {
                            s
                        }
                    })
                    .collect();
                push_row(&mut rows, cells);
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "datafusion-lance"
    }

    async fn sleep(dur: std::time::Duration) {
        tokio::time::sleep(dur).await;
    }
}

/// Multi-line cells (EXPLAIN plans) become one output row per line.
fn push_row(rows: &mut Vec<Vec<String>>, cells: Vec<String>) {
    if !cells.iter().any(|c| c.contains('\n')) {
        rows.push(cells);
        return;
    }
    let split: Vec<Vec<&str>> = cells.iter().map(|c| c.lines().collect()).collect();
    let height = split.iter().map(Vec::len).max().unwrap_or(1);
    for line in 0..height {
        rows.push(
            split
                .iter()
                .map(|lines| lines.get(line).map(|l| l.to_string()).unwrap_or_default())
                .map(|l| if l.is_empty() { String::new() } else { l })
                .filter(|l| !l.is_empty())
                .collect(),
        );
    }
}

fn test_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            test_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "slt") {
            out.push(path);
        }
    }
}

/// The context a test file runs in. Files under `catalog/` also get the
/// Lance catalog `lake` over the namespace at `__SCRATCH__/lake`; files
/// under `cloud/` a fake LanceDB Cloud service (kept alive by the caller).
async fn context_for(
    path: &Path,
    scratch: &Path,
) -> (SessionContext, Option<fake_cloud::FakeCloud>) {
    let config = SessionConfig::new()
        .with_target_partitions(4)
        .with_information_schema(true);
    let ctx = datafusion_lance::lance_session_context(config);
    // Each file gets its own Lance session so cache statistics are deterministic.
    ctx.with_lance_session_cache(LanceSessionCache::private(CacheBudgets::from_env()));
    let ctx = datafusion_lance::catalogs::enable_lance_url_tables(ctx);
    fixtures::create_all(scratch).await;
    if path.parent().and_then(|p| p.file_name()) == Some("catalog".as_ref()) {
        let root = scratch.join("lake");
        std::fs::create_dir_all(&root).expect("catalog root");
        let root = root.to_str().expect("utf-8 scratch path");
        datafusion_lance::register_lance_catalog(&ctx, "lake", root, Default::default())
            .await
            .expect("register catalog lake");
    }
    let cloud = if path.parent().and_then(|p| p.file_name()) == Some("cloud".as_ref()) {
        let fake = fake_cloud::FakeCloud::start().await;
        fixtures::numbers(&fake.table_path("numbers")).await;
        fixtures::docs(&fake.table_path("docs")).await;
        fixtures::indexed(&fake.table_path("indexed")).await;
        Some(fake)
    } else {
        None
    };
    (ctx, cloud)
}

async fn run_file(path: &Path, complete: bool) -> Result<(), String> {
    let name = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let scratch = tempfile::Builder::new()
        .prefix(&format!("slt-{name}-"))
        .tempdir()
        .map_err(|e| e.to_string())?;
    unnamed_errors(path)?;
    let (ctx, fake) = context_for(path, scratch.path()).await;
    let cloud = fake.as_ref().map(|f| f.url());
    let scratch_str = scratch.path().to_string_lossy().to_string();
    let mut runner = Runner::new(move || {
        let ctx = ctx.clone();
        let scratch = scratch_str.clone();
        let cloud = cloud.clone();
        async move {
            Ok(LanceDb {
                ctx,
                scratch,
                cloud,
            })
        }
    });
    runner.add_label("datafusion-lance");
    if complete {
        runner
            .update_test_file(
                path,
                " ",
                sqllogictest::default_validator,
                sqllogictest::default_normalizer,
                sqllogictest::default_column_validator,
            )
            .await
            .map_err(|e| e.to_string())
    } else {
        runner
            .run_file_async(path)
            .await
            .map_err(|e| e.display(true).to_string())
    }
}

/// Every expected error names its message: a bare `statement error` would
/// pass on any failure, including the wrong one.
fn unnamed_errors(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let bare: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let words: Vec<&str> = line.split_whitespace().collect();
            matches!(
                words.as_slice(),
                ["statement", "error"] | ["query", "error"] | ["query", _, "error"]
            )
        })
        .map(|(i, _)| format!("line {}", i + 1))
        .collect();
    if bare.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "expected errors without a message ({}): write `statement error <regex>`",
            bare.join(", ")
        ))
    }
}

fn main() -> ExitCode {
    let mut complete = false;
    let mut filters = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--complete" => complete = true,
            // libtest flags cargo may pass through.
            a if a.starts_with("--") => {}
            a => filters.push(a.to_string()),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sqllogictests/test_files");
    let mut files = Vec::new();
    test_files(&root, &mut files);
    files.sort();
    files.retain(|f| {
        let rel = f
            .strip_prefix(&root)
            .unwrap_or(f)
            .to_string_lossy()
            .to_string();
        filters.is_empty() || filters.iter().any(|flt| rel.contains(flt.as_str()))
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut failed = 0;
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        let started = std::time::Instant::now();
        match runtime.block_on(run_file(file, complete)) {
            Ok(()) => println!("ok      {rel} ({:.1?})", started.elapsed()),
            Err(e) => {
                failed += 1;
                println!("FAILED  {rel}\n{e}");
            }
        }
    }
    println!(
        "\nsqllogictests: {} files, {} passed, {} failed{}",
        files.len(),
        files.len() - failed,
        failed,
        if complete { " (--complete)" } else { "" }
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
