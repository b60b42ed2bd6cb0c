"""`lance-sql serve` through the ADBC Flight SQL driver, compared with `lance-sql -c`."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import lance
import pytest

from conftest import CORPUS, REGISTER, cli, first_line

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}

def connect(server, **kwargs):
    return flight_sql.connect(server.uri, db_kwargs={**COOKIES, **kwargs})


def rows(cursor, sql: str, parameters=None) -> list[dict]:
    cursor.execute(sql, parameters)
    return cursor.fetch_arrow_table().to_pylist()


def update(cursor, sql: str) -> int:
    cursor.adbc_statement.set_sql_query(sql)
    return cursor.adbc_statement.execute_update()


def test_queries_equal_lance_sql_c(server, lance_sql, data_dir):
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute(REGISTER)
        cur.fetchall()
        for sql in CORPUS:
            assert rows(cur, sql) == cli(lance_sql, data_dir, sql), sql


def test_dml_returns_counts_and_makes_one_version_each(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        assert update(cur, "INSERT INTO t VALUES (10000, 1.0, 'new'), (10001, 2.0, 'new')") == 2
        assert lance.dataset(uri).version == 2
        assert update(cur, "DELETE FROM t WHERE id < 100") == 100
        assert update(cur, "UPDATE t SET x = -1.0 WHERE grp = 'new'") == 2
        merged = rows(
            cur,
            "MERGE INTO t USING (SELECT * FROM (VALUES (5, 0.5, 'm'), (20000, 9.0, 'm')) v(id, x, grp)) s "
            "ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x WHEN NOT MATCHED THEN INSERT *",
        )
        assert len(merged) == 1
        # Time travel reads what the first version held.
        assert rows(cur, "SELECT count(*) AS n FROM t VERSION AS OF 1") == [{"n": 10_000}]
    ds = lance.dataset(uri)
    assert ds.version == 5
    table = ds.to_table().to_pydict()
    # id 5 was deleted before the merge, so the merge inserted it again.
    assert len(table["id"]) == 10_000 - 100 + 2 + 2
    assert sorted(i for i, g in zip(table["id"], table["grp"]) if g in ("new", "m")) == [
        5,
        10000,
        10001,
        20000,
    ]


def test_prepared_statements_bind_question_marks_and_dollar_numbers(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        assert rows(cur, "SELECT id FROM t WHERE id = ? OR (grp = ? AND id < ?) ORDER BY id", (5, "g1", 5)) == [
            {"id": 1},
            {"id": 4},
            {"id": 5},
        ]
        # A string value is one literal, whatever it holds.
        assert rows(cur, "SELECT count(*) AS n FROM t WHERE grp = $1", ("g1' OR '1'='1",)) == [{"n": 0}]
        # The same statement again with other values.
        assert rows(cur, "SELECT count(*) AS n FROM t WHERE grp = $1", ("g2",)) == [{"n": 3333}]
        # A version clause's value is a parameter too (planned with it).
        assert rows(cur, "SELECT count(*) AS n FROM t VERSION AS OF ?", (1,)) == [{"n": 10_000}]
        # executemany: one INSERT per row of values.
        cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [(90001, 1.0, "p"), (90002, 2.0, "p")])
    ds = lance.dataset(uri)
    assert ds.version == 3
    assert ds.count_rows("grp = 'p'") == 2


def test_catalog_metadata(server):
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        cur.fetchall()
        assert "TABLE" in conn.adbc_get_table_types()
        schema = conn.adbc_get_table_schema("t", catalog_filter="datafusion", db_schema_filter="public")
        assert schema.names == ["id", "x", "grp"]
        objects = conn.adbc_get_objects(depth="tables", catalog_filter="datafusion").read_all().to_pylist()
        tables = [
            t["table_name"]
            for c in objects
            for s in c["catalog_db_schemas"]
            if s["db_schema_name"] == "public"
            for t in s["db_schema_tables"]
        ]
        assert tables == ["t"]
        info = conn.adbc_get_info()
        assert info["vendor_name"] == "lance-sql"


def test_each_connection_has_its_own_session(server):
    with connect(server) as one, one.cursor() as a, connect(server) as two, two.cursor() as b:
        a.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        a.fetchall()
        a.execute("SET datafusion.execution.batch_size = 7")
        a.fetchall()
        assert rows(a, "SHOW datafusion.execution.batch_size")[0]["value"] == "7"
        assert rows(b, "SHOW datafusion.execution.batch_size")[0]["value"] == "8192"
        with pytest.raises(adbc_driver_manager.Error, match="table 't' not found|t.*not found"):
            rows(b, "SELECT * FROM t")
        # A table registered in one session stays there.
        assert rows(a, "SELECT count(*) AS n FROM t") == [{"n": 10_000}]


def test_bad_sql_is_a_clear_error_and_changes_nothing(server, data_dir):
    uri = str(data_dir / "numbers.lance")
    with connect(server) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="Expected"):
            rows(cur, "SELEC 1")
        cur.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        cur.fetchall()
        with pytest.raises(adbc_driver_manager.Error, match="nope"):
            update(cur, "UPDATE t SET nope = 1")
        with pytest.raises(adbc_driver_manager.Error, match="occurs more than once in the source"):
            rows(
                cur,
                "MERGE INTO t USING (SELECT * FROM (VALUES (1, 0.0, 'a'), (1, 1.0, 'b')) v(id, x, grp)) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x",
            )
        assert rows(cur, "SELECT 1 AS one") == [{"one": 1}]
    assert lance.dataset(uri).version == 1


def test_credentials_are_checked_and_never_echoed(serve, data_dir):
    server = serve(env={"LANCE_SQL_AUTH_TOKEN": "t0ps3cret"})
    with pytest.raises(adbc_driver_manager.Error, match="invalid credentials") as denied:
        with connect(server, **{"adbc.flight.sql.authorization_header": "Bearer wr0ng-t0ken-42"}) as conn:
            with conn.cursor() as cur:
                rows(cur, "SELECT 1")
    assert "t0ps3cret" not in str(denied.value) and "wr0ng-t0ken-42" not in str(denied.value)
    with pytest.raises(adbc_driver_manager.Error, match="needs credentials"):
        with connect(server) as conn, conn.cursor() as cur:
            rows(cur, "SELECT 1")
    with connect(server, **{"adbc.flight.sql.authorization_header": "Bearer t0ps3cret"}) as conn:
        with conn.cursor() as cur:
            assert rows(cur, "SELECT 1 AS one") == [{"one": 1}]
    users = data_dir / "users"
    users.write_text("# name:password\nann:pw-of-ann\n")
    by_user = serve("--users", str(users))
    with connect(by_user, username="ann", password="pw-of-ann") as conn, conn.cursor() as cur:
        assert rows(cur, "SELECT 2 AS two") == [{"two": 2}]
    with pytest.raises(adbc_driver_manager.Error, match="invalid credentials"):
        with connect(by_user, username="ann", password="wrong") as conn, conn.cursor() as cur:
            rows(cur, "SELECT 2")
    for s in (server, by_user):
        assert "t0ps3cret" not in s.log.read_text() and "pw-of-ann" not in s.log.read_text()


def test_a_server_without_credentials_stays_on_loopback(lance_sql, data_dir):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: were the check
    # missing, binding would fail with another error, never listen.
    for args, refused in [
        (["--flight-sql", "192.0.2.1:0"], "192.0.2.1:0"),
        (["--flight-sql", "127.0.0.1:0", "--postgres", "192.0.2.1:0"], "192.0.2.1:0"),
    ]:
        done = subprocess.run(
            [lance_sql, "serve", *args],
            cwd=data_dir,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0
        assert f"refusing to serve on {refused} without credentials" in done.stderr, done.stderr


def test_a_client_killed_mid_result_leaves_the_server_serving(serve, data_dir):
    # One statement at a time: a place the killed client's query kept would
    # make the next query wait out its timeout and fail.
    server = serve("--max-concurrent-statements", "1", "--statement-timeout", "60")
    # A 100M-row result; the client reads one batch and is killed.
    client = textwrap.dedent(
        f"""
        import adbc_driver_flightsql.dbapi as fs, sys
        conn = fs.connect({server.uri!r})
        cur = conn.cursor()
        cur.execute("SELECT a.id, b.id FROM 'numbers.lance' a CROSS JOIN 'numbers.lance' b")
        reader = cur.fetch_record_batch()
        reader.read_next_batch()
        print("got a batch", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", client],
        cwd=data_dir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = first_line(proc)
        assert line.strip() == "got a batch"
    finally:
        proc.kill()
        proc.wait(30)
    with connect(server) as conn, conn.cursor() as cur:
        for _ in range(3):
            assert rows(cur, "SELECT count(*) AS n FROM 'numbers.lance'") == [{"n": 10_000}]
    assert server.alive()
    # Nothing changed the table.
    assert lance.dataset(str(data_dir / "numbers.lance")).version == 1


def test_statement_timeout_stops_a_long_query(serve):
    server = serve("--statement-timeout", "1")
    with connect(server) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="statement timeout"):
            rows(cur, "SELECT count(*) FROM 'numbers.lance' a, 'numbers.lance' b, 'numbers.lance' c WHERE a.x + b.x = c.x + 0.25")
        assert rows(cur, "SELECT 1 AS one") == [{"one": 1}]


def test_a_write_past_the_statement_timeout_is_cancelled_and_commits_nothing(serve, data_dir):
    uri = str(data_dir / "numbers.lance")
    server = serve("--statement-timeout", "1")
    with connect(server) as conn, conn.cursor() as cur:
        cur.execute("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        cur.fetchall()
        # 100M rows to write: far more than a second in any build.
        with pytest.raises(adbc_driver_manager.Error, match="statement timeout"):
            update(cur, "INSERT INTO t SELECT a.id + 10000 * (b.id + 1), a.x, a.grp FROM t a CROSS JOIN t b")
        assert lance.dataset(uri).version == 1
        assert lance.dataset(uri).count_rows() == 10_000
        # The server writes on: the next INSERT commits once.
        assert update(cur, "INSERT INTO t VALUES (-1, 0.0, 'after')") == 1
    assert lance.dataset(uri).version == 2
    assert lance.dataset(uri).count_rows() == 10_001
