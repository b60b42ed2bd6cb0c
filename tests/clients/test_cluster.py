"""`lance-sql serve --cluster df://…`: network clients' statements run on a
Ballista cluster (a `lance-cluster` scheduler and executor on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.request

import adbc_driver_flightsql.dbapi as flight_sql
import lance
import psycopg
import pytest

from conftest import first_line

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}


def get(scheduler: str, path: str) -> list:
    with urllib.request.urlopen(f"http://{scheduler}{path}", timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def scheduler(data_dir):
    """A scheduler and one executor on 127.0.0.1; their address."""
    binary = os.environ.get("LANCE_CLUSTER_BIN", "")
    if not binary or not os.path.exists(binary):
        pytest.fail("LANCE_CLUSTER_BIN is not set (make server-test sets it)")
    processes = []
    try:
        processes.append(subprocess.Popen(
            [binary, "scheduler", "--bind", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=data_dir,
        ))
        line = first_line(processes[0], 60)
        address = line.strip().removeprefix("lance-cluster scheduler listening on ")
        threading.Thread(target=processes[0].stdout.read, daemon=True).start()
        processes.append(subprocess.Popen(
            [binary, "executor", "--scheduler", address, "--bind", "127.0.0.1:0", "--slots", "2",
             "--heartbeat-seconds", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=data_dir,
        ))
        for _ in range(200):  # 20 s at most
            if len(get(address, "/api/executors")) >= 1:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the executor did not register")
        yield address
    finally:
        for process in processes:
            process.kill()
            process.wait(15)


def test_statements_from_both_protocols_run_on_the_cluster(serve, scheduler, data_dir):
    server = serve("--cluster", f"df://{scheduler}")
    uri = str(data_dir / "numbers.lance")
    register = "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'"
    jobs_before = len(get(scheduler, "/api/jobs"))
    with flight_sql.connect(server.uri, db_kwargs=COOKIES) as conn, conn.cursor() as cur:
        cur.execute(register)
        cur.fetchall()
        cur.execute("SELECT grp, count(*) AS n, sum(id) AS s FROM t WHERE id % 2 = 0 GROUP BY grp ORDER BY grp")
        assert cur.fetch_arrow_table().to_pylist() == [
            {"grp": g, "n": n, "s": s}
            for g, n, s in [
                (f"g{k}", len([i for i in range(0, 10_000, 2) if i % 3 == k]),
                 sum(i for i in range(0, 10_000, 2) if i % 3 == k))
                for k in range(3)
            ]
        ]
        cur.adbc_statement.set_sql_query("INSERT INTO t SELECT id + 10000, x, grp FROM t WHERE id < 100")
        assert cur.adbc_statement.execute_update() == 100
    assert lance.dataset(uri).version == 2
    assert lance.dataset(uri).count_rows() == 10_100
    with psycopg.connect(host="127.0.0.1", port=server.pg_port, user="me", dbname="d",
                         autocommit=True, connect_timeout=10) as conn:
        conn.execute(register)
        assert conn.execute("SELECT count(*), max(id) FROM t").fetchall() == [(10_100, 10_099)]
        assert conn.execute("DELETE FROM t WHERE id >= 10000").statusmessage == "DELETE 100"
    assert lance.dataset(uri).version == 3
    assert lance.dataset(uri).count_rows() == 10_000
    # The scheduler ran them: a job per query (and more for the writes).
    assert len(get(scheduler, "/api/jobs")) >= jobs_before + 3
