//! `lance-sql` in a real terminal, typed at as a person does: tables,
//! statements split and continued over lines, `\` commands, history,
//! the progress line, Ctrl-C on queries, writes and scripts, Ctrl-D.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use datafusion::prelude::SessionConfig;
use datafusion_lance::LanceSessionContextExt;

use crate::support::all_files;
use crate::support::pty::{CTRL_C, CTRL_D, Terminal};

/// Long enough for a debug build on a loaded machine; each wait ends as
/// soon as what it waits for shows.
const SHOWS: Duration = Duration::from_secs(60);

/// The REPL's prompt, shown with its hint on an empty line.
const PROMPT: &str = "for help";

/// `lance-sql` with `args`, its home directory (history) in `home`.
fn lance_sql(home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lance-sql"));
    command
        .args(args)
        .env("HOME", home)
        .env("TERM", "xterm")
        .env_remove("LANCE_SQL_PROGRESS_DELAY_MS");
    command
}

/// Writes `big.lance` (`rows` rows: `id`, `k = id % 9`) and `small.lance`
/// (10 rows of the same columns) under `dir`.
async fn tables(dir: &Path, rows: u64) {
    let ctx = datafusion_lance::lance_session_context(SessionConfig::new());
    for (name, n) in [("big", rows), ("small", 10)] {
        let sql = format!(
            "COPY (SELECT CAST(v AS BIGINT) AS id, CAST(v % 9 AS BIGINT) AS k \
             FROM generate_series(0, {}) AS g(v)) TO '{}' STORED AS LANCE",
            n - 1,
            dir.join(format!("{name}.lance")).display()
        );
        ctx.lance_sql(&sql).await.unwrap().collect().await.unwrap();
    }
}

fn create(dir: &Path, name: &str) -> String {
    format!(
        "CREATE EXTERNAL TABLE {name} STORED AS LANCE LOCATION '{}';",
        dir.join(format!("{name}.lance")).display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_prints_tables_runs_commands_and_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    tables(dir.path(), 100).await;
    let mut term = Terminal::spawn(lance_sql(home.path(), &[]));
    term.expect(PROMPT, SHOWS);

    // Two statements on one line, a `;` inside quotes: a table each.
    term.line("SELECT 1 AS a, 'x;y' AS b; SELECT 2 AS c;");
    let shown = term.expect("| 2 |", SHOWS);
    assert!(
        shown.contains("| a | b   |\n+---+-----+\n| 1 | x;y |"),
        "{shown}"
    );
    assert!(shown.contains("| c |"), "{shown}");
    term.expect(PROMPT, SHOWS);

    // A statement continued over lines, with a comment holding `;`.
    term.line("SELECT");
    term.line("  3 AS d -- not the end;");
    term.line(";");
    let shown = term.expect("| 3 |", SHOWS);
    assert!(shown.contains("| d |"), "{shown}");
    term.expect(PROMPT, SHOWS);

    // Time travel and a table, through this crate's front door.
    term.line(&create(dir.path(), "small"));
    term.expect(PROMPT, SHOWS);
    term.line("SELECT count(*) AS n FROM small VERSION AS OF 1;");
    let shown = term.expect("| 10 |", SHOWS);
    assert!(shown.contains("| n  |"), "{shown}");
    term.expect(PROMPT, SHOWS);

    // `\` commands.
    term.line("\\d");
    let shown = term.expect("small", SHOWS);
    assert!(shown.contains("table_name"), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.line("\\d small");
    let shown = term.expect("| k ", SHOWS);
    assert!(shown.contains("| id "), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.line("\\?");
    let shown = term.expect("describe table", SHOWS);
    assert!(shown.contains("| \\d name "), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.line("\\pset format csv");
    term.expect(PROMPT, SHOWS);
    term.line("SELECT 5 AS e;");
    term.expect("e\n5\n", SHOWS);
    term.expect(PROMPT, SHOWS);
    term.line("\\pset format table");
    term.expect(PROMPT, SHOWS);
    term.line("\\quiet true");
    term.expect("Quiet mode set to true", SHOWS);
    term.expect(PROMPT, SHOWS);
    term.line("\\nonsense");
    term.expect("is not a valid command", SHOWS);

    // Ctrl-C at the prompt clears the line; Ctrl-D leaves with status 0.
    term.send(b"SELECT 'never run' AS x");
    term.send(CTRL_C);
    let mut shown = term.expect("^C", SHOWS);
    shown += &term.expect(PROMPT, SHOWS);
    term.line("SELECT 'next' AS x;");
    shown += &term.expect("| next", SHOWS);
    assert!(!shown.contains("| never run"), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.send(CTRL_D);
    let status = term.wait(SHOWS);
    assert!(status.success(), "{status:?}");

    let history =
        std::fs::read_to_string(home.path().join(".lance-sql_history")).unwrap_or_default();
    assert!(history.contains("SELECT 2 AS c"), "{history}");
    assert!(history.contains("\\pset format csv"), "{history}");

    // The next run recalls the last entries with the up arrow.
    let mut term = Terminal::spawn(lance_sql(home.path(), &["--format", "table"]));
    term.expect(PROMPT, SHOWS);
    // Up once: the last statement of the first run.
    term.send(b"\x1b[A\r");
    let shown = term.expect("| next |", SHOWS);
    assert!(shown.contains("| x    |"), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.send(CTRL_D);
    assert!(term.wait(SHOWS).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_running_query_and_the_progress_line_ticks_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    tables(dir.path(), 200_000).await;
    let mut term = Terminal::spawn(lance_sql(home.path(), &[]));
    term.expect(PROMPT, SHOWS);
    term.line(&create(dir.path(), "big"));
    term.expect(PROMPT, SHOWS);

    // Billions of joined rows: it runs until cancelled. Its scans end early;
    // the line still comes after 2 s, and keeps ticking.
    term.line("SELECT count(*) FROM big x JOIN big y ON x.k = y.k;");
    let elapsed = |term: &mut Terminal| -> f64 {
        let shown = term.expect(" s · ", SHOWS);
        let line = shown.rsplit('\n').next().unwrap_or_default();
        line.split(' ')
            .next()
            .and_then(|seconds| seconds.parse().ok())
            .unwrap_or_else(|| panic!("no elapsed time in {shown:?}"))
    };
    let first = elapsed(&mut term);
    assert!(first >= 2.0, "the line showed before 2 s: {first}");
    // It ticks while the join runs: later elapsed times show.
    while elapsed(&mut term) < first + 1.0 {}

    term.send(CTRL_C);
    term.expect("^C", SHOWS);
    term.expect(PROMPT, SHOWS);
    // The work stopped: the process is idle (allowing 10% of a core).
    let before = term.cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let used = term.cpu_time() - before;
    assert!(
        used < Duration::from_millis(100),
        "still busy: {used:?} of CPU in 1 s"
    );

    // The REPL goes on.
    term.line("SELECT 42 AS answer;");
    term.expect("| 42 ", SHOWS);
    term.expect(PROMPT, SHOWS);
    term.send(CTRL_D);
    assert!(term.wait(SHOWS).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_an_insert_which_commits_nothing_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    tables(dir.path(), 100_000).await;
    let small = dir.path().join("small.lance");
    let before = all_files(&small);
    let mut command = lance_sql(home.path(), &[]);
    command.env("LANCE_SQL_PROGRESS_DELAY_MS", "0");
    let mut term = Terminal::spawn(command);
    term.expect(PROMPT, SHOWS);
    term.line(&format!(
        "{} {}",
        create(dir.path(), "big"),
        create(dir.path(), "small")
    ));
    term.expect(PROMPT, SHOWS);

    term.line("INSERT INTO small SELECT x.id, y.k FROM big x JOIN big y ON x.k = y.k;");
    // Cancelled while its writers write (the line counts what they got).
    term.expect("rows written", SHOWS);
    term.send(CTRL_C);
    let shown = term.expect(PROMPT, SHOWS);
    assert!(shown.contains("^C\nCancelled"), "{shown}");

    // The table is as it was: same version, same rows, same files.
    term.line("SELECT count(*) AS n, max(version) AS v FROM small, lance_versions('small');");
    let shown = term.expect("Elapsed", SHOWS);
    assert!(shown.contains("| 10 | 1 |"), "{shown}");
    term.expect(PROMPT, SHOWS);
    term.send(CTRL_D);
    assert!(term.wait(SHOWS).success());
    assert_eq!(all_files(&small), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_script_run_from_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    tables(dir.path(), 200_000).await;
    let script = dir.path().join("script.sql");
    std::fs::write(
        &script,
        format!(
            "{}\nSELECT count(*) FROM big x JOIN big y ON x.k = y.k;\nSELECT 'after' AS never;\n",
            create(dir.path(), "big")
        ),
    )
    .unwrap();
    let mut command = lance_sql(home.path(), &["-f", script.to_str().unwrap()]);
    command.env("LANCE_SQL_PROGRESS_DELAY_MS", "0");
    let mut term = Terminal::spawn(command);
    term.expect("rows read", SHOWS);
    term.send(CTRL_C);
    let status = term.wait(SHOWS);
    assert_eq!(status.code(), Some(130), "{}", term.rest());
    assert!(!term.rest().contains("never"), "{}", term.rest());
}
