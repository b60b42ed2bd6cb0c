//! The `lance-sql` binary: flags, formats, exit status, Lance DDL and URL tables.

use std::process::{Command, Output};

use crate::fixtures::{numbers, versions};

fn lance_sql(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .args(args)
        .output()
        .expect("run lance-sql")
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_prints_every_row_under_a_memory_limit() {
    const ROWS: usize = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t.lance").to_string_lossy().to_string();
    let create = format!(
        "CREATE EXTERNAL TABLE t (id BIGINT NOT NULL, s VARCHAR) STORED AS LANCE LOCATION '{uri}'"
    );
    let insert = format!(
        "INSERT INTO t SELECT value, 'row-' || repeat('x', 40) || CAST(value AS VARCHAR) \
         FROM generate_series(1, {ROWS})"
    );
    let out = lance_sql(&["-q", "-c", &create, "-c", &insert]);
    assert!(out.status.success(), "{}", stderr(&out));
    // About 60 MB of rows: the export holds one batch at a time; the sort
    // spills (one partition: no merge of partitions competing for memory).
    for (query, limit) in [
        ("SELECT * FROM t", "16M"),
        ("SELECT * FROM t ORDER BY s DESC", "40M"),
    ] {
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
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(",row-")).collect();
        assert_eq!(rows.len(), ROWS, "{query}");
        if query.contains("ORDER BY") {
            assert!(rows[0].starts_with("999999,"), "{query}: {}", rows[0]);
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
    use std::io::Write;
    use std::process::Stdio;

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_lance-sql"))
        .current_dir(dir.path())
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
    let out = child.wait_with_output().unwrap();
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
