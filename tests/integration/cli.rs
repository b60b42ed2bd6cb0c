//! The `lance-sql` binary: flags, formats, exit status, Lance DDL and URL tables.

use std::process::{Command, Output};

use crate::fixtures::{numbers, versions};

fn lance_sql(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .args(args)
        .output()
        .expect("run lance-sql")
}

/// `lance-sql` with `args` in `dir`, `script` typed at its prompt.
fn repl(dir: &std::path::Path, args: &[&str], script: &str) -> Output {
    use std::io::Write;
    use std::process::Stdio;

    let mut child = Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lance-sql");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_formats_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir
        .path()
        .join("numbers.lance")
        .to_string_lossy()
        .to_string();
    numbers(&uri).await;
    let create = format!("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'");

    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &create,
        "-c",
        "SELECT id, s FROM t WHERE id < 3 ORDER BY id",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "id,s\n0,\n1,\n2,it's 2\n");

    let out = lance_sql(&[
        "-q",
        "--format",
        "ndjson",
        "-c",
        &create,
        "-c",
        "SELECT count(*) AS n FROM t",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), r#"{"n":941}"#);

    let out = lance_sql(&[
        "-q",
        "--format",
        "json",
        "-c",
        &create,
        "-c",
        "SELECT id FROM t ORDER BY id LIMIT 2",
    ]);
    assert_eq!(stdout(&out).trim(), r#"[{"id":0},{"id":1}]"#);

    let out = lance_sql(&[
        "-q",
        "--format",
        "table",
        "--maxrows",
        "2",
        "-c",
        &create,
        "-c",
        "SELECT id FROM t ORDER BY id",
    ]);
    assert!(
        stdout(&out).contains("| 0  |") && stdout(&out).contains("| .  |"),
        "{}",
        stdout(&out)
    );

    // Errors: non-zero exit, message on stderr or stdout naming the problem.
    let out = lance_sql(&["-q", "-c", "SELECT * FROM no_such_table"]);
    assert!(!out.status.success());
    assert!(format!("{}{}", stdout(&out), stderr(&out)).contains("no_such_table"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_url_tables_and_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir
        .path()
        .join("versions.lance")
        .to_string_lossy()
        .to_string();
    versions(&uri).await;

    // datafusion-cli validates OPTIONS itself: lance.* keys must pass it.
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE v1 STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.version' '1')"
        ),
        "-c",
        "SELECT count(*) AS n FROM v1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n\n10\n");

    let out = lance_sql(&[
        "-q",
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE bad STORED AS LANCE LOCATION '{uri}' OPTIONS ('lance.verison' '1')"
        ),
    ]);
    assert!(!out.status.success());
    assert!(format!("{}{}", stdout(&out), stderr(&out)).contains("unknown option 'lance.verison'"));

    // Quoted paths open Lance datasets.
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &format!("SELECT count(*) AS n FROM '{uri}'"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "n\n25\n");

    // -f runs every statement; one failure makes the exit status non-zero.
    let script = dir.path().join("script.sql");
    std::fs::write(
        &script,
        format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}';\nSELECT broken FROM t;\nSELECT max(id) AS m\n  FROM t;\n"
        ),
    )
    .unwrap();
    let out = lance_sql(&["-q", "--format", "csv", "-f", script.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("m\n29\n"),
        "later statements still ran: {}",
        stdout(&out)
    );
    assert!(stderr(&out).contains("broken"), "{}", stderr(&out));
}

/// `-c` and `-f` run every statement of their text, however many share a
/// line; a `;` inside quotes or a comment does not end one.
#[test]
fn several_statements_in_one_command_or_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        "SELECT 1 AS a; SELECT 'x;y' AS b -- c; d\n; SELECT 3 AS c",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "a\n1\nb\nx;y\nc\n3\n");

    // The first failing statement of -c ends the run.
    let out = lance_sql(&["-q", "--format", "csv", "-c", "SELECT nope; SELECT 2 AS b"]);
    assert!(!out.status.success());
    assert_eq!(stdout(&out), "");

    let script = dir.path().join("two.sql");
    std::fs::write(
        &script,
        "SELECT 1 AS a; SELECT 2 AS b;\nSELECT 'p;q' AS c;\n",
    )
    .unwrap();
    let out = lance_sql(&["-q", "--format", "csv", "-f", script.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "a\n1\nb\n2\nc\np;q\n");
}

/// Row formats print every row of every statement kind: `EXECUTE` of a
/// prepared statement included, past `--maxrows` and over several batches;
/// `table` (and the default `automatic`) prints `--maxrows` rows.
#[test]
fn every_row_of_an_execute_prints_in_row_formats() {
    let prepare = "PREPARE p(BIGINT) AS SELECT v FROM generate_series(1, 30000) AS g(v) WHERE v <= $1 ORDER BY v";
    for format in ["csv", "tsv", "ndjson", "json"] {
        let out = lance_sql(&[
            "-q",
            "--format",
            format,
            "--maxrows",
            "5",
            "-c",
            prepare,
            "-c",
            "EXECUTE p(20000)",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        let rows = match format {
            "csv" | "tsv" => text.lines().count() - 1,
            _ => text.matches("{\"v\":").count(),
        };
        assert_eq!(rows, 20000, "{format}");
        assert!(text.contains("20000"), "{format}");
    }
    for args in [
        &["--maxrows", "5"][..],
        &["--maxrows", "5", "--format", "table"],
    ] {
        let mut all = vec!["-c", prepare, "-c", "EXECUTE p(20000)"];
        all.extend_from_slice(args);
        let out = lance_sql(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("| 5 ") && !text.contains("| 6 "), "{text}");
        assert!(
            text.contains("20000 row(s) fetched. (First 5 displayed"),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_into_runs_in_lance_sql() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v DOUBLE, PRIMARY KEY (id)) STORED AS LANCE LOCATION '{uri}'"
        ),
        "-c",
        "INSERT INTO t VALUES (1, 1.0)",
        "-c",
        "MERGE INTO t USING (SELECT 1 AS id, 5.0 AS v UNION ALL SELECT 2, 6.0) AS s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
        "-c",
        "SELECT * FROM t ORDER BY id",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "count\n1\ninserted,updated,deleted,version\n1,1,0,3\nid,v\n1,5.0\n2,6.0\n"
    );
}

/// `ALTER TABLE` runs in `lance-sql`, and the next statement sees the new
/// column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_table_runs_in_lance_sql() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'"),
        "-c",
        "INSERT INTO t VALUES (1), (2)",
        "-c",
        "ALTER TABLE t ADD COLUMN twice BIGINT AS (id * 2)",
        "-c",
        "SELECT * FROM t ORDER BY id",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "count\n2\ncolumn,action,version\ntwice,added,3\nid,twice\n1,2\n2,4\n"
    );
}

/// csv prints every row, batch by batch (datafusion-cli 54 keeps only the
/// first batches past `--maxrows`), under a memory limit smaller than the
/// result; a sort larger than the limit spills instead of failing.
/// 1,000,000 rows under 16M/40M in `make test`; 10,000,000 rows (about
/// 600 MB) under 256M in `make test-nightly`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_prints_every_row_under_a_memory_limit() {
    let (rows, limits) = if crate::support::nightly() {
        (10_000_000usize, ["256M", "256M"])
    } else {
        (1_000_000, ["16M", "40M"])
    };
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let create = format!(
        "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, s VARCHAR) STORED AS LANCE LOCATION '{uri}'"
    );
    let insert = format!(
        "INSERT INTO t SELECT value, 'row-' || repeat('x', 40) || CAST(value AS VARCHAR) \
         FROM generate_series(1, {rows})"
    );
    let out = lance_sql(&["-q", "-c", &create, "-c", &insert]);
    assert!(out.status.success(), "{}", stderr(&out));
    // About 60 bytes a row: the export holds one batch at a time; the sort
    // spills (one partition: no merge of partitions competing for memory).
    for (query, limit) in ["SELECT * FROM t", "SELECT * FROM t ORDER BY s DESC"]
        .into_iter()
        .zip(limits)
    {
        let out = lance_sql(&[
            "-q",
            "--format",
            "csv",
            "--memory-limit",
            limit,
            "-c",
            "SET datafusion.execution.target_partitions = 1",
            "-c",
            &create,
            "-c",
            query,
        ]);
        assert!(out.status.success(), "{query}: {}", stderr(&out));
        let text = stdout(&out);
        let printed: Vec<&str> = text.lines().filter(|l| l.contains(",row-")).collect();
        assert_eq!(printed.len(), rows, "{query}");
        if query.contains("ORDER BY") {
            let last = format!("{},", rows - 1);
            assert!(printed[0].starts_with(&last), "{query}: {}", printed[0]);
        }
    }
    let out = lance_sql(&["--memory-limit", "lots", "-c", "SELECT 1"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("invalid memory limit 'lots'"),
        "{}",
        stderr(&out)
    );
}

/// `-r` runs a startup file before the commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_file_runs_first() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let rc = dir.path().join("startup.sql");
    std::fs::write(
        &rc,
        format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}';\n\
             INSERT INTO t VALUES (41), (42);\n"
        ),
    )
    .unwrap();
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-r",
        rc.to_str().unwrap(),
        "-c",
        "SELECT max(id) AS m FROM t",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).ends_with("m\n42\n"), "{}", stdout(&out));
}

/// The interactive loop, fed through stdin: statements (also `MERGE INTO`,
/// which DataFusion cannot plan), backslash commands, errors that do not end
/// the session, and `\q`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_runs_statements_and_commands() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let script = format!(
        "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, v BIGINT) STORED AS LANCE LOCATION '{uri}';\n\
         INSERT INTO t VALUES (1, 10), (2, 20);\n\
         SELECT nope FROM t;\n\
         \\pset format csv\n\
         MERGE INTO t USING (SELECT 2 AS id, 200 AS v UNION ALL SELECT 3, 30) AS s ON t.id = s.id \
         WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v);\n\
         SELECT id, v FROM t ORDER BY id;\n\
         \\q\n"
    );
    let out = repl(dir.path(), &[], &script);
    let (stdout, stderr) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("No field named nope") || stdout.contains("No field named nope"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("inserted,updated,deleted,version\n1,1,0,3"),
        "{stdout}"
    );
    assert!(stdout.contains("id,v\n1,10\n2,200\n3,30"), "{stdout}");
}

/// `--catalog NAME=ROOT` attaches a Lance namespace: tables created in one
/// run are listed and read by the next, and by Lance's layout on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_attached_with_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_string_lossy().to_string();
    let attach = format!("lake={root}");
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "--catalog",
        &attach,
        "-c",
        "CREATE TABLE lake.public.t AS SELECT value AS id FROM generate_series(1, 500)",
        "-c",
        "CREATE SCHEMA lake.db",
        "-c",
        "CREATE TABLE lake.db.u (name VARCHAR)",
        "-c",
        "SELECT split_id, rows FROM lance_build_permutation('lake.public.t', 'lake.db.split', \
         'split=sequential', 'counts=100,400')",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("t.lance").is_dir());
    assert!(
        stdout(&out).ends_with("split_id,rows\n0,100\n1,400\n"),
        "{}",
        stdout(&out)
    );

    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "--catalog",
        &attach,
        "-c",
        "SELECT table_schema, table_name FROM information_schema.tables \
         WHERE table_catalog = 'lake' AND table_schema <> 'information_schema' \
         ORDER BY 1, 2",
        "-c",
        "SELECT count(*) AS n, sum(id) AS s FROM lake.public.t",
        "-c",
        "SELECT count(*) AS n, min(id) AS lo FROM lance_permutation('lake.db.split', 1)",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "table_schema,table_name\ndb,split\ndb,u\npublic,t\nn,s\n500,125250\nn,lo\n400,101\n"
    );

    let out = lance_sql(&["-q", "--catalog", "lake", "-c", "SELECT 1"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("NAME=ROOT"), "{}", stderr(&out));
}

/// `--progress always` (with no delay) draws a progress line on stderr and
/// erases it before the statement's output; by default, with stderr piped,
/// there is none. stdout holds the rows only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_line_shows_on_stderr_only() {
    const CLEAR: &str = "\r\x1b[2K";
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let create =
        format!("CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}'");
    let statements = [
        "-c",
        &create,
        "-c",
        "INSERT INTO t SELECT value FROM generate_series(1, 100000)",
        "-c",
        "SELECT count(*) AS n FROM t WHERE id % 2 = 0",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .env("LANCE_SQL_PROGRESS_DELAY_MS", "0")
        .args(["-q", "--format", "csv", "--progress", "always"])
        .args(statements)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "count\n100000\nn\n50000\n");
    let err = stderr(&out);
    // One line per statement it ran (INSERT, SELECT), each erased.
    assert!(err.starts_with(&format!("{CLEAR}0.0 s")), "{err:?}");
    assert!(err.ends_with(CLEAR), "{err:?}");
    assert!(
        err.matches(&format!("{CLEAR}0.0 s")).count() >= 2,
        "{err:?}"
    );
    assert!(!err.contains('\n'), "{err:?}");

    let uri2 = dir.path().join("u.lance").to_string_lossy().to_string();
    let out = lance_sql(&[
        "-q",
        "--format",
        "csv",
        "-c",
        &create.replace(&uri, &uri2),
        "-c",
        "INSERT INTO t SELECT value FROM generate_series(1, 1000)",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

/// The progress line reads the running plan's metrics: rows its Lance scans
/// read, rows and fragments its writers wrote (`INSERT` and `UPDATE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_rows_and_fragments_of_the_plan() {
    use std::sync::Arc;

    use datafusion::physical_plan::collect;
    use datafusion_lance::LanceSessionContextExt;
    use datafusion_lance::progress::{Progress, WatchedPlan};
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let ctx = crate::support::context(2, &crate::support::private_cache());
    crate::support::ok(
        &ctx,
        &format!(
            "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL) STORED AS LANCE LOCATION '{uri}' \
             OPTIONS ('lance.max_rows_per_file' '2000')"
        ),
    )
    .await;
    let run = |statement: &'static str| {
        let ctx = ctx.clone();
        async move {
            let plan = ctx
                .lance_sql(statement)
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap();
            // What the CLI's line reads (phase aside: another test's index
            // build may be running in this process).
            let watched = WatchedPlan::default();
            watched.set(Arc::clone(&plan));
            let before = watched.progress();
            assert_eq!(
                (before.rows_read, before.rows_written),
                (0, 0),
                "before it runs"
            );
            collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
            let after = watched.progress();
            let metrics = Progress::of_plan(plan.as_ref());
            assert_eq!(
                (after.rows_read, after.rows_written, after.fragments_written),
                (
                    metrics.rows_read,
                    metrics.rows_written,
                    metrics.fragments_written
                )
            );
            metrics
        }
    };
    let written = run("INSERT INTO t SELECT value FROM generate_series(1, 5000)").await;
    assert_eq!(written.rows_written, 5000, "{written:?}");
    // Two writers (two partitions), files of at most 2,000 rows.
    assert!(written.fragments_written >= 3, "{written:?}");
    assert_eq!(written.rows_read, 0, "{written:?}");
    let read = run("SELECT * FROM t").await;
    assert_eq!(read.rows_read, 5000, "{read:?}");
    assert_eq!(read.rows_written, 0, "{read:?}");
    let updated = run("UPDATE t SET id = id + 1 WHERE id <= 100").await;
    assert_eq!(updated.rows_written, 100, "{updated:?}");
}

/// Tables and copies of other formats on local paths go through the same
/// front door as Lance's (planned once); `SHOW` prints every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_formats_on_local_paths() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "a,b\n1,x\n2,y\n3,z\n").unwrap();
    let parquet = dir.path().join("out.parquet");
    let out = lance_sql(&[
        "-q",
        "--format",
        "table",
        "--maxrows",
        "1",
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE c STORED AS CSV LOCATION '{}' OPTIONS ('format.has_header' 'true')",
            csv.display()
        ),
        "-c",
        &format!(
            "COPY (SELECT a * 10 AS a, b FROM c) TO '{}' STORED AS PARQUET",
            parquet.display()
        ),
        "-c",
        &format!(
            "CREATE EXTERNAL TABLE p STORED AS PARQUET LOCATION '{}'",
            parquet.display()
        ),
        "-c",
        "SELECT sum(a) AS s FROM p",
        "-c",
        "SHOW TABLES",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("| 60 |"), "{text}");
    // More rows than --maxrows: SHOW prints them all.
    for row in [
        "| datafusion    | public             | c ",
        "| datafusion    | public             | p ",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
}

/// `PREPARE` / `EXECUTE` of a vector search, as typed: in one `-c`, in a
/// script (`-f`) and in the REPL.
#[test]
fn a_prepared_search_runs_in_lance_sql() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("v.lance").to_string_lossy().to_string();
    let statements = format!(
        "CREATE EXTERNAL TABLE v (id BIGINT NOT NULL, emb FLOAT[2]) STORED AS LANCE LOCATION '{uri}';\n\
         INSERT INTO v VALUES (1, [1, 0]), (2, [0, 1]), (3, [1, 1]);\n\
         PREPARE near(FLOAT, FLOAT, BIGINT) AS\n  SELECT id FROM lance_vector_search('v', 'emb', [$1, $2], $3) ORDER BY _distance, id;\n\
         EXECUTE near(0.0, 1.0, 2);\n\
         EXECUTE near(1.0, 0.0, 1);\n"
    );
    let expected = "id\n2\n3\nid\n1\n";
    let printed = |out: &Output| {
        assert!(out.status.success(), "{}", stderr(out));
        let text = stdout(out);
        text[text.find("id\n").expect("a result")..].to_string()
    };
    std::fs::remove_dir_all(&uri).ok();
    let out = lance_sql(&["-q", "--format", "csv", "-c", &statements]);
    assert_eq!(printed(&out), expected);

    std::fs::remove_dir_all(&uri).unwrap();
    let script = dir.path().join("prepared.sql");
    std::fs::write(&script, &statements).unwrap();
    let out = lance_sql(&["-q", "--format", "csv", "-f", &script.to_string_lossy()]);
    assert_eq!(printed(&out), expected);

    std::fs::remove_dir_all(&uri).unwrap();
    let out = repl(
        dir.path(),
        &["-q", "--format", "csv"],
        &format!("{statements}\\q\n"),
    );
    assert_eq!(printed(&out), expected);
}

/// `--memory-limit` counts an index build (Lance builds outside DataFusion's
/// pool; the estimate is reserved first): typed at the command line, a
/// build over the limit fails naming the index and leaves the table without
/// it; with room it builds.
#[test]
fn create_index_over_the_memory_limit_fails_naming_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("v.lance").to_string_lossy().to_string();
    let copy = format!(
        "COPY (SELECT value AS id, arrow_cast(make_array(CAST(value % 13 AS FLOAT), 1.0), \
         'FixedSizeList(2, Float32)') AS emb FROM generate_series(0, 999)) TO '{uri}' STORED AS LANCE"
    );
    let create = format!("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION '{uri}'");
    let out = lance_sql(&["-q", "-c", &copy]);
    assert!(out.status.success(), "{}", stderr(&out));
    let index = "CREATE INDEX v_emb ON v USING IVF_FLAT (emb) WITH (num_partitions = 2)";
    let count = "SELECT count(*) AS n FROM lance_indices('v')";

    let out = lance_sql(&["-q", "--memory-limit", "32M", "-c", &create, "-c", index]);
    assert!(!out.status.success());
    let error = stderr(&out);
    assert!(
        error.contains("Resources exhausted") && error.contains("building index 'v_emb' of"),
        "{error}"
    );
    let out = lance_sql(&["-q", "--format", "csv", "-c", &create, "-c", count]);
    assert_eq!(stdout(&out).trim(), "n\n0");

    let out = lance_sql(&["-q", "--memory-limit", "256M", "-c", &create, "-c", index]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = lance_sql(&["-q", "--format", "csv", "-c", &create, "-c", count]);
    assert_eq!(stdout(&out).trim(), "n\n1");
}
