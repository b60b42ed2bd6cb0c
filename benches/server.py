"""`make bench-server`: what a network client pays for `lance-sql serve`.

One release `lance-sql serve --flight-sql … --postgres …` on loopback, its
clients in this process (or, for 16 clients, in 16 processes):

* Q6-like and Q1-like over the 10M-row bench table through Flight SQL (the
  ADBC driver) and through Postgres (psycopg, binary and text), against
  the same statement in `lance-sql -c` (the time it prints, so without the
  process start), both as the first statement of the process and run again
  in it (warm, the baseline of the ratio): the protocol's overhead;
* rows per second of the table's 4 columns (a 10M-row result), read batch by batch
  (ADBC) and row by row (psycopg, binary, streamed);
* a point lookup (`WHERE id = $1`, a BTREE index on a 1M-row table) with 1
  and 16 clients, against the same lookups one after another in
  `lance-sql -c`.

Every figure is the median of 5 interleaved runs with min–max; ratio = time ÷
the baseline's time (for lookups, time per query). Every side's answers are
checked against `lance-sql -c`'s.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import adbc_driver_flightsql.dbapi as flight_sql
import lance
import psycopg
import pyarrow as pa

from lineitem_queries import Q1, Q6

# Smaller values (BENCH_SERVER_RUNS=1 BENCH_SERVER_LOOKUPS=10) make a quick
# check of the script itself, not figures.
# ADBC's DB-API warns that autocommit cannot be turned off: each statement
# commits on its own, as documented.
warnings.filterwarnings("ignore", message="Cannot disable autocommit")
RUNS = int(os.environ.get("BENCH_SERVER_RUNS", "5"))
COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}
WIDE = "SELECT l_quantity, l_extendedprice, l_discount, l_tax FROM lineitem"
LOOKUP = "SELECT id, v FROM points WHERE id = $1"
POINTS = 1_000_000
LOOKUPS_ONE = int(os.environ.get("BENCH_SERVER_LOOKUPS", "200"))  # per run, one client
LOOKUPS_EACH = max(1, LOOKUPS_ONE // 5)  # per client per run, 16 clients


class Serve:
    """A `lance-sql serve` on loopback, stopped by `close`."""

    def __init__(self, lance_sql: str, cwd: str):
        self.log = open(os.path.join(cwd, "serve.log"), "w+")
        self.proc = subprocess.Popen(
            [lance_sql, "serve", "--flight-sql", "127.0.0.1:0", "--postgres", "127.0.0.1:0"],
            cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = open(self.log.name).read()
            flight = re.search(r"Flight SQL listening on (127\.0\.0\.1:\d+)", text)
            pg = re.search(r"Postgres listening on 127\.0\.0\.1:(\d+)", text)
            if flight and pg:
                self.uri, self.pg_port = f"grpc://{flight.group(1)}", int(pg.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"lance-sql serve did not start: {open(self.log.name).read()}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def register(lineitem: str, points: str) -> list[str]:
    return [
        f"CREATE EXTERNAL TABLE lineitem STORED AS LANCE LOCATION '{lineitem}'",
        f"CREATE EXTERNAL TABLE points STORED AS LANCE LOCATION '{points}'",
    ]


def cli(lance_sql: str, setup: list[str], statements: list[str]) -> tuple[list[list[dict]], list[float]]:
    """Rows and the `Elapsed` of each of `statements`, run by `lance-sql -c` after `setup`."""
    out = subprocess.run(
        [lance_sql, "--format", "ndjson", "-c", *setup, *statements],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    results, elapsed, rows = [], [], []
    for line in out.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
        elif line.startswith("Elapsed "):
            results.append(rows)
            elapsed.append(float(line.split()[1]))
            rows = []
    # The setup statements print an (empty) result each.
    return results[len(setup):], elapsed[len(setup):]


def same(a: list[dict], b: list[dict]) -> bool:
    """Equal rows, numbers to 1e-9 relative (sums are summed in any order)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if list(x.values()) != list(y.values()):
            for u, v in zip(x.values(), y.values()):
                if isinstance(u, (int, float)) and isinstance(v, (int, float)):
                    if abs(float(u) - float(v)) > 1e-9 * max(1.0, abs(float(v))):
                        return False
                elif str(u) != str(v):
                    return False
    return True


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.4f} | {min(times):.4f}–{max(times):.4f}"


def queries(lance_sql: str, server: Serve, setup: list[str], total: int) -> None:
    flight = flight_sql.connect(server.uri, db_kwargs=COOKIES)
    pg = psycopg.connect(host="127.0.0.1", port=server.pg_port, user="bench", dbname="d", autocommit=True)
    fcur = flight.cursor()
    for sql in setup:
        fcur.execute(sql)
        fcur.fetchall()
        pg.execute(sql)

    def via_flight(sql):
        fcur.execute(sql)
        return fcur.fetch_arrow_table().to_pylist()

    def via_pg(sql, binary):
        with pg.cursor(binary=binary) as cur:
            cur.execute(sql)
            names = [c.name for c in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    sides = [
        ("Flight SQL (ADBC)", via_flight),
        ("Postgres (psycopg, binary)", lambda sql: via_pg(sql, True)),
        ("Postgres (psycopg, text)", lambda sql: via_pg(sql, False)),
    ]
    for name, sql in [("Q6-like", Q6), ("Q1-like", Q1)]:
        times = {side: [] for side, _ in sides}
        cold, base = [], []
        for _, run in sides:
            run(sql)  # one warm-up run each, as every section does
        for _ in range(RUNS):
            # As users get it (the first statement of a new process), and
            # at its best (the same statement again, in the same process).
            (expected, again), (first, second) = cli(lance_sql, setup, [sql, sql])
            assert same(again, expected)
            cold.append(first)
            base.append(second)
            for side, run in sides:
                start = time.perf_counter()
                got = run(sql)
                times[side].append(time.perf_counter() - start)
                assert same(got, expected), (side, got, expected)
        b = statistics.median(base)
        print(f"| {name} ({total:,} rows) | median s | min–max | ÷ lance-sql -c (warm) |")
        print("|---|---|---|---|")
        print(f"| `lance-sql -c`, first statement of the process (its Elapsed) | {summary(cold)} | "
              f"{statistics.median(cold) / b:.2f}× |")
        print(f"| `lance-sql -c`, the same statement again (its Elapsed) | {summary(base)} | 1.00× |")
        for side, _ in sides:
            print(f"| {side} | {summary(times[side])} | {statistics.median(times[side]) / b:.2f}× |")
        print()

    # A 10M-row result, read as it arrives.
    def rows_flight():
        fcur.execute(WIDE)
        return sum(batch.num_rows for batch in fcur.fetch_record_batch())

    def rows_pg():
        n = 0
        with pg.cursor(binary=True) as cur:
            for _ in cur.stream(WIDE, size=10_000):
                n += 1
        return n

    sides = [("Flight SQL (ADBC), batch by batch", rows_flight),
             ("Postgres (psycopg, binary), row by row", rows_pg)]
    times = {side: [] for side, _ in sides}
    for _ in range(RUNS):
        for side, run in sides:
            start = time.perf_counter()
            n = run()
            times[side].append(time.perf_counter() - start)
            assert n == total, (side, n)
    print(f"| `{WIDE}` ({total:,} rows) | median s | min–max | rows/s (median) |")
    print("|---|---|---|---|")
    for side, _ in sides:
        m = statistics.median(times[side])
        print(f"| {side} | {summary(times[side])} | {total / m / 1e6:.2f} M |")
    print()
    fcur.close()
    flight.close()
    pg.close()


def lookup_client(protocol: str, uri: str, pg_port: int, setup: list[str], keys: list[int],
                  barrier, results) -> None:
    """One client: connects, registers, waits at the barrier, runs its lookups;
    puts (when it finished, how many answers were wrong) or the error."""
    try:
        run_lookups(protocol, uri, pg_port, setup, keys, barrier, results)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put((None, repr(e)))
        barrier.abort()


def run_lookups(protocol, uri, pg_port, setup, keys, barrier, results) -> None:
    if protocol == "flight":
        conn = flight_sql.connect(uri, db_kwargs=COOKIES)
        cur = conn.cursor()
        for sql in setup:
            cur.execute(sql)
            cur.fetchall()

        def lookup(k):
            cur.execute(LOOKUP, (k,))
            return cur.fetchall()
    else:
        conn = psycopg.connect(host="127.0.0.1", port=pg_port, user="bench", dbname="d", autocommit=True)
        for sql in setup:
            conn.execute(sql)

        def lookup(k):
            # psycopg's placeholder; it sends $1 with the value bound.
            return conn.execute(LOOKUP.replace("$1", "%s"), (k,)).fetchall()
    barrier.wait(120)
    wrong = 0
    for k in keys:
        got = lookup(k)
        wrong += [tuple(r) for r in got] != [(k, k * 0.5)]
    results.put((time.perf_counter(), wrong))
    conn.close()


def lookups(lance_sql: str, server: Serve, setup: list[str]) -> None:
    rng = random.Random(7)
    # Spawned, not forked: the ADBC driver's Go runtime does not survive a fork.
    mp = multiprocessing.get_context("spawn")
    # In process: the same lookups one after another in one `lance-sql -c`.
    base = []
    sides = {(p, c): [] for p in ("flight", "postgres") for c in (1, 16)}
    for _ in range(RUNS):
        keys = [rng.randrange(POINTS) for _ in range(LOOKUPS_ONE)]
        results, elapsed = cli(lance_sql, setup, [LOOKUP.replace("$1", str(k)) for k in keys])
        for k, rows in zip(keys, results):
            assert rows == [{"id": k, "v": k * 0.5}], (k, rows)
        base.append(sum(elapsed) / len(keys))
        for protocol in ("flight", "postgres"):
            for clients in (1, 16):
                each = LOOKUPS_ONE if clients == 1 else LOOKUPS_EACH
                barrier = mp.Barrier(clients + 1)
                results = mp.Queue()
                procs = [
                    mp.Process(target=lookup_client, args=(
                        protocol, server.uri, server.pg_port, setup,
                        [rng.randrange(POINTS) for _ in range(each)], barrier, results))
                    for _ in range(clients)
                ]
                for p in procs:
                    p.start()
                barrier.wait(120)
                start = time.perf_counter()
                ends = [results.get(timeout=600) for _ in procs]
                for p in procs:
                    p.join(60)
                assert all(end is not None and wrong == 0 for end, wrong in ends), ends
                sides[(protocol, clients)].append((max(e for e, _ in ends) - start) / (clients * each))
    b = statistics.median(base)
    print(f"| `{LOOKUP}` (BTREE, {POINTS // 1_000_000}M rows) | queries/s (median) | "
          "ms per query, median | min–max | ÷ lance-sql -c |")
    print("|---|---|---|---|---|")
    print(f"| `lance-sql -c`, one after another (its Elapsed) | {1 / b:.0f} | {b * 1e3:.2f} | "
          f"{min(base) * 1e3:.2f}–{max(base) * 1e3:.2f} | 1.00× |")
    for (protocol, clients), t in sides.items():
        m = statistics.median(t)
        name = "Flight SQL (ADBC)" if protocol == "flight" else "Postgres (psycopg)"
        print(f"| {name}, {clients} client{'s' if clients > 1 else ''} | {1 / m:.0f} | {m * 1e3:.2f} | "
              f"{min(t) * 1e3:.2f}–{max(t) * 1e3:.2f} | {m / b:.2f}× |")
    print()


def main(lance_sql: str, lineitem: str) -> None:
    lineitem = os.path.abspath(lineitem)
    with tempfile.TemporaryDirectory() as tmp:
        points = os.path.join(tmp, "points.lance")
        ids = pa.array(range(POINTS), pa.int64())
        ds = lance.write_dataset(pa.table({"id": ids, "v": pa.array([i * 0.5 for i in range(POINTS)])}), points)
        ds.create_scalar_index("id", "BTREE")
        setup = register(lineitem, points)
        server = Serve(lance_sql, tmp)
        try:
            print(f"\nServer: {lance_sql} serve on 127.0.0.1, clients on this machine ({os.cpu_count()} cores); "
                  f"{RUNS} interleaved runs, median (min–max); {datetime.date.today()}\n")
            queries(lance_sql, server, setup, lance.dataset(lineitem).count_rows())
            lookups(lance_sql, server, setup)
        finally:
            server.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
