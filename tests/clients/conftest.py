"""Fixtures: a `lance-sql serve` on loopback, tables written by pylance."""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import signal
import subprocess
import time

import lance
import pyarrow as pa
import pytest

# Every wait here is bounded: a server that does not come up fails the test.
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15


@pytest.fixture(scope="session")
def lance_sql() -> str:
    """The lance-sql binary `make server-test` built."""
    path = os.environ.get("LANCE_SQL_BIN", "")
    if not path or not os.path.exists(path):
        pytest.fail("LANCE_SQL_BIN is not set (make server-test sets it)")
    return path


def first_line(proc: subprocess.Popen, timeout_s: float = 120) -> str:
    """The first line a child prints, waited for at most `timeout_s` (a server
    that collected a whole result before sending any would exceed it)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        raise AssertionError(f"no output within {timeout_s} s")
    return proc.stdout.readline()


def numbers(n: int, start: int = 0) -> pa.Table:
    """Rows ``id`` start.., ``x`` = id * 1.5, ``grp`` = 'g' + id % 3."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([i * 1.5 for i in ids], pa.float64()),
            "grp": pa.array([f"g{i % 3}" for i in ids]),
        }
    )


# Statements whose answers through each protocol must equal `lance-sql -c`'s.
REGISTER = "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'"
CORPUS = [
    "SELECT count(*) AS n FROM 'numbers.lance'",
    "SELECT grp, count(*) AS n, sum(x) AS s, min(id) AS lo FROM t GROUP BY grp ORDER BY grp",
    "SELECT id, x FROM t WHERE id BETWEEN 100 AND 110 AND grp = 'g1' ORDER BY id",
    "SELECT version FROM lance_versions('numbers.lance') ORDER BY version",
    "SELECT count(*) AS n FROM t VERSION AS OF 1",
    "SELECT id, rows FROM lance_fragments('numbers.lance') ORDER BY id",
    "SELECT l2_distance([1.0, 2.0], [4.0, 6.0]) AS d",
]


def cli(lance_sql: str, cwd: pathlib.Path, sql: str) -> list[dict]:
    """The rows `lance-sql -c` prints for `sql` (after registering `t`)."""
    out = subprocess.run(
        [lance_sql, "-q", "--format", "ndjson", "-c", f"{REGISTER}; {sql}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def data_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """`numbers.lance`: 10,000 rows in 4 fragments, by pylance."""
    lance.write_dataset(numbers(10_000), str(tmp_path / "numbers.lance"), max_rows_per_file=2_500)
    return tmp_path


class Server:
    """A running `lance-sql serve`; stopped with SIGTERM at the end."""

    def __init__(self, lance_sql: str, cwd: pathlib.Path, *args: str, env: dict | None = None):
        self.log = cwd / f"serve-{time.monotonic_ns()}.log"
        self._log = open(self.log, "w")
        self.proc = subprocess.Popen(
            [lance_sql, "serve", "--flight-sql", "127.0.0.1:0", "--postgres", "127.0.0.1:0", *args],
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # HOME is the test's directory: no developer's ~/.lance-sqlrc.
            env={**os.environ, "HOME": str(cwd), **(env or {})},
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            text = self.log.read_text()
            flight = re.search(r"Flight SQL listening on (127\.0\.0\.1:\d+)", text)
            postgres = re.search(r"Postgres listening on 127\.0\.0\.1:(\d+)", text)
            if flight and postgres:
                self.uri = f"grpc://{flight.group(1)}"
                self.pg_port = int(postgres.group(1))
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"lance-sql serve exited: {text}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"lance-sql serve did not start: {text}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def serve(lance_sql: str, data_dir: pathlib.Path):
    """Starts servers in `data_dir` with the given arguments; stops them after the test."""
    servers: list[Server] = []

    def start(*args: str, env: dict | None = None) -> Server:
        server = Server(lance_sql, data_dir, *args, env=env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def server(serve) -> Server:
    """An open server on loopback."""
    return serve()
