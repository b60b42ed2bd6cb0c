"""`lance-sql serve --postgres` through psql and psycopg, compared with `lance-sql -c`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import lance
import psycopg
import pytest
from psycopg.rows import dict_row

from conftest import CORPUS, REGISTER, cli, first_line


def connect(server, **kwargs):
    return psycopg.connect(
        host="127.0.0.1", port=server.pg_port, user="me", dbname="datafusion", autocommit=True, **kwargs
    )


def psql(server, script: str, password: str | None = None, one_message: bool = False) -> subprocess.CompletedProcess:
    """Runs `script` in psql: read from stdin (psql sends each statement on its
    own), or with `one_message` as `-c` (one simple-query message)."""
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    if password is not None:
        env["PGPASSWORD"] = password
    return subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "me", "-d", "datafusion",
         "-v", "ON_ERROR_STOP=1", *(["-c", script] if one_message else [])],
        input=None if one_message else script,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_answers_equal_lance_sql_c(server, lance_sql, data_dir, binary):
    with connect(server, row_factory=dict_row) as conn:
        conn.execute(REGISTER)
        for sql in CORPUS:
            got = conn.execute(sql, binary=binary).fetchall()
            assert got == cli(lance_sql, data_dir, sql), sql


def as_text(value) -> str:
    """A value as psql prints it unaligned: NULL empty, numbers by value."""
    return "" if value is None else str(value)


def same_text(printed: str, value) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return abs(float(printed) - float(value)) <= 1e-9 * max(1.0, abs(float(value)))
    return printed == as_text(value)


def test_psql_answers_the_corpus_equal_to_lance_sql_c(server, lance_sql, data_dir):
    # Each statement of the corpus in one psql script: quiet, unaligned,
    # tuples only — a row per line, a blank line after each result.
    script = f"{REGISTER};\n" + "".join(f"{sql};\n\\echo\n" for sql in CORPUS)
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    done = subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-F", "|", "-h", "127.0.0.1", "-p", str(server.pg_port),
         "-U", "me", "-d", "datafusion", "-v", "ON_ERROR_STOP=1"],
        input=script, capture_output=True, text=True, timeout=60, env=env,
    )
    assert done.returncode == 0, done.stderr
    results = [r for r in done.stdout.split("\n\n") if r.strip()]
    assert len(results) == len(CORPUS), done.stdout
    for sql, printed in zip(CORPUS, results):
        expected = cli(lance_sql, data_dir, sql)
        lines = [line for line in printed.splitlines() if line]
        assert len(lines) == len(expected), (sql, lines, expected)
        for line, row in zip(lines, expected):
            fields = line.split("|")
            assert len(fields) == len(row) and all(
                same_text(f, v) for f, v in zip(fields, row.values())
            ), (sql, line, row)


def test_psql_runs_scripts_and_lists_and_describes_tables(server):
    done = psql(
        server,
        f"""{REGISTER};
        \\dt
        \\d t
        SELECT count(*) AS n FROM t VERSION AS OF 1;
        BEGIN;
        INSERT INTO t VALUES (10000, 1.0, 'psql');
        COMMIT;
        SELECT grp, id FROM t WHERE grp = 'psql';
        SELECT [1.0, 2.5] AS v, 'it''s' AS s;
        """,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert " public | t    | table |" in out
    assert 'Table "public.t"' in out
    for line in (" id     | bigint ", " x      | double precision ", " grp    | text "):
        assert line in out, out
    assert "INSERT 0 1" in out and "BEGIN" in out and "COMMIT" in out
    assert " psql | 10000" in out
    assert "{1.0,2.5} | it's" in out


def test_dml_tags_counts_and_versions(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn:
        conn.execute(REGISTER)
        assert conn.execute("INSERT INTO t VALUES (10000, 1.0, 'new'), (10001, 2.0, 'new')").rowcount == 2
        assert conn.execute("DELETE FROM t WHERE id < 100").rowcount == 100
        assert conn.execute("UPDATE t SET x = -1.0 WHERE grp = 'new'").rowcount == 2
        merged = conn.execute(
            "MERGE INTO t USING (SELECT * FROM (VALUES (200, 0.5, 'm'), (20000, 9.0, 'm')) v(id, x, grp)) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET grp = s.grp WHEN NOT MATCHED THEN INSERT *"
        ).fetchall()
        assert len(merged) == 1
        # A transaction is accepted, and each statement commits on its own:
        # ROLLBACK undoes nothing (README, "Over the network").
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (30000, 0.0, 'kept')")
        conn.execute("ROLLBACK")
    ds = lance.dataset(uri)
    assert ds.version == 6
    assert ds.count_rows() == 10_000 - 100 + 2 + 1 + 1
    assert ds.count_rows("grp = 'm'") == 2 and ds.count_rows("grp = 'kept'") == 1


def test_parameters_in_every_statement_kind(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn:
        conn.execute(REGISTER)
        for binary in (False, True):
            assert conn.execute(
                "SELECT id FROM t WHERE id = %s OR (grp = %s AND id < %s) ORDER BY id", (5, "g1", 5), binary=binary
            ).fetchall() == [(1,), (4,), (5,)]
            assert conn.execute("SELECT count(*) FROM t VERSION AS OF %s", (1,), binary=binary).fetchall() == [
                (10_000,)
            ]
        assert conn.execute("SELECT count(*) FROM t WHERE grp = %s", ("g1' OR '1'='1",)).fetchall() == [(0,)]
        # $k takes the k-th value, also when a number is skipped.
        skipped = conn.pgconn.exec_params(b"SELECT $2 AS b, $3 AS c", [b"one", b"two", b"three"])
        assert [skipped.get_value(0, 0), skipped.get_value(0, 1)] == [b"two", b"three"]
        assert conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (90001, 1.5, "it's")).rowcount == 1
        assert conn.execute("UPDATE t SET x = %s WHERE id = %s", (2.5, 90001)).rowcount == 1
        assert conn.execute("DELETE FROM t WHERE id = %s", (90001,)).rowcount == 1
    assert lance.dataset(uri).version == 4


def test_errors_are_clear_and_change_nothing(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn:
        conn.execute(REGISTER)
        with pytest.raises(psycopg.errors.SyntaxError) as syntax:
            conn.execute("SELEC 1")
        assert syntax.value.sqlstate == "42601"
        with pytest.raises(psycopg.Error, match="nope"):
            conn.execute("UPDATE t SET nope = 1")
        with pytest.raises(psycopg.Error, match="occurs more than once in the source"):
            conn.execute(
                "MERGE INTO t USING (SELECT * FROM (VALUES (1, 0.0, 'a'), (1, 1.0, 'b')) v(id, x, grp)) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x"
            )
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
    assert lance.dataset(uri).version == 1


def test_passwords_are_checked_and_never_echoed(serve, data_dir):
    server = serve(env={"LANCE_SQL_AUTH_TOKEN": "t0ps3cret"})
    denied = psql(server, "SELECT 1;", password="wrong")
    assert denied.returncode != 0 and "t0ps3cret" not in denied.stderr
    assert "authentication failed" in denied.stderr or "invalid credentials" in denied.stderr, denied.stderr
    allowed = psql(server, "SELECT 41 + 1 AS answer;", password="t0ps3cret")
    assert allowed.returncode == 0 and " 42" in allowed.stdout
    users = data_dir / "users"
    users.write_text("ann:pw-of-ann\n")
    by_user = serve("--users", str(users))
    with psycopg.connect(host="127.0.0.1", port=by_user.pg_port, user="ann", password="pw-of-ann", dbname="d") as c:
        assert c.execute("SELECT 2").fetchall() == [(2,)]
    with pytest.raises(psycopg.OperationalError, match="invalid credentials"):
        psycopg.connect(host="127.0.0.1", port=by_user.pg_port, user="bob", password="pw-of-ann", dbname="d")
    for s in (server, by_user):
        assert "t0ps3cret" not in s.log.read_text() and "pw-of-ann" not in s.log.read_text()


def test_a_client_killed_mid_result_leaves_the_server_serving(serve, data_dir):
    # One statement at a time: a place the killed client's query kept would
    # make the next query wait out its timeout and fail.
    server = serve("--max-concurrent-statements", "1", "--statement-timeout", "60")
    client = textwrap.dedent(
        f"""
        import psycopg, sys
        conn = psycopg.connect(host="127.0.0.1", port={server.pg_port}, user="me", dbname="d")
        rows = conn.cursor().stream("SELECT a.id, b.id FROM 'numbers.lance' a CROSS JOIN 'numbers.lance' b")
        next(rows)
        print("got a row", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", client], cwd=data_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first_line(proc).strip() == "got a row"
    finally:
        proc.kill()
        proc.wait(30)
    with connect(server) as conn:
        for _ in range(3):
            assert conn.execute("SELECT count(*) FROM 'numbers.lance'").fetchall() == [(10_000,)]
    assert server.alive()
    # Nothing changed the table.
    assert lance.dataset(str(data_dir / "numbers.lance")).version == 1


def test_several_statements_in_one_message_each_take_their_turn(serve):
    # psql -c sends one message; with one place, each statement must give
    # it back before the next runs.
    server = serve("--max-concurrent-statements", "1", "--statement-timeout", "60")
    done = psql(server, "SELECT 1 AS a; SELECT 2 AS b; SELEC 3; SELECT 4 AS d;", one_message=True)
    assert " a \n---\n 1\n" in done.stdout and " b \n---\n 2\n" in done.stdout, done.stdout
    assert "42601" in done.stderr or "Expected" in done.stderr, done.stderr
    assert " d \n" not in done.stdout


# Runs until cancelled: 10^12 pairs of pairs, no row before the end.
ENDLESS = "SELECT count(*) FROM 'numbers.lance' a, 'numbers.lance' b, 'numbers.lance' c WHERE a.x + b.x = c.x + 0.25"


def cancelled_while_running(conn, sql: str) -> BaseException | None:
    """Runs `sql` on a thread and sends cancel requests (bounded: 60 at most,
    one per second) until it ends; what it raised."""
    outcome: list[BaseException | None] = []

    def run():
        try:
            conn.execute(sql)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - the verdict is the test's
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    # A request that arrives before the statement starts cancels nothing:
    # send another until the statement has ended.
    for _ in range(60):
        conn.cancel_safe(timeout=10)
        thread.join(1.0)
        if not thread.is_alive():
            break
    assert not thread.is_alive(), "the statement did not stop on a cancel request"
    return outcome[0]


def test_a_cancel_request_stops_a_query_and_a_write(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn:
        conn.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        raised = cancelled_while_running(conn, ENDLESS)
        assert isinstance(raised, psycopg.errors.QueryCanceled), raised
        assert "canceling statement due to user request" in str(raised)
        # 100M rows to write, cancelled: nothing committed.
        raised = cancelled_while_running(
            conn, "INSERT INTO t SELECT a.id + 10000 * (b.id + 1), a.x, a.grp FROM t a CROSS JOIN t b"
        )
        assert isinstance(raised, psycopg.errors.QueryCanceled), raised
        assert lance.dataset(uri).version == 1
        assert lance.dataset(uri).count_rows() == 10_000
        # The connection goes on.
        assert conn.execute("INSERT INTO t VALUES (-1, 0.0, 'after')").rowcount == 1
    assert lance.dataset(uri).version == 2


def test_ctrl_c_in_psql_cancels_the_running_statement(server):
    def attempt() -> tuple[int, str]:
        proc = subprocess.Popen(
            ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "me", "-d", "d"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
        )
        try:
            proc.stdin.write(f"\\echo started\n{ENDLESS};\n")
            proc.stdin.close()
            assert first_line(proc, 60).strip() == "started"
            # Ctrl-C, again until psql ends (bounded: 60 s).
            for _ in range(60):
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            return proc.returncode, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    # A Ctrl-C in the instant between psql's echo and its sending the
    # statement ends psql instead (exit 3, nothing cancelled): try again.
    for _ in range(5):
        code, err = attempt()
        if code != 3 or "canceling" in err:
            break
    assert code != 0
    assert "canceling statement due to user request" in err, err
    with connect(server) as conn:
        assert conn.execute("SELECT count(*) FROM 'numbers.lance'").fetchall() == [(10_000,)]
