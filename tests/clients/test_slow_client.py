"""A huge result to a slow client: the server sends it as the client reads
(gRPC and TCP flow control), so its memory does not grow with the result,
and other clients are served meanwhile."""

from __future__ import annotations

import time

import adbc_driver_flightsql.dbapi as flight_sql
import psycopg
import pytest

from test_load import peak_rss_kib

# 100M rows (1.6 GB as Arrow, more as Postgres text) if it were held whole.
HUGE = "SELECT a.id AS a, b.id AS b FROM 'numbers.lance' a CROSS JOIN 'numbers.lance' b"
# The server's peak memory while a client takes its time over HUGE; far
# below what holding even a tenth of the result would take.
PEAK_MIB = 400
# How long the client stalls mid-result: the time a server that buffered
# ahead of its client would fill memory in.
STALL_S = 3.0


def read_slowly(batches, other) -> int:
    """Reads 40 batches with pauses, stalling once for STALL_S, and checks
    that `other` (another client's query) is answered meanwhile; the rows read."""
    n = 0
    for i in range(40):
        n += next(batches)
        if i == 20:
            time.sleep(STALL_S)
            assert other() == 10_000
        time.sleep(0.01)
    return n


@pytest.mark.parametrize("protocol", ["flight_sql", "postgres"])
def test_a_huge_result_to_a_slow_client_keeps_the_servers_memory_bounded(serve, protocol):
    server = serve()

    def other_flight() -> int:
        with flight_sql.connect(server.uri) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM 'numbers.lance'")
            return cur.fetchone()[0]

    def other_postgres() -> int:
        with psycopg.connect(host="127.0.0.1", port=server.pg_port, user="me", dbname="d",
                             autocommit=True, connect_timeout=10) as conn:
            return conn.execute("SELECT count(*) FROM 'numbers.lance'").fetchone()[0]

    if protocol == "flight_sql":
        with flight_sql.connect(server.uri) as conn, conn.cursor() as cur:
            cur.execute(HUGE)
            reader = cur.fetch_record_batch()
            batches = (reader.read_next_batch().num_rows for _ in iter(int, 1))
            assert read_slowly(batches, other_flight) >= 40
    else:
        with psycopg.connect(host="127.0.0.1", port=server.pg_port, user="me", dbname="d",
                             autocommit=True, connect_timeout=10) as conn:
            rows = conn.cursor().stream(HUGE)
            # psycopg hands rows one by one: a "batch" is 10,000 of them.
            batches = (sum(1 for _ in zip(range(10_000), rows)) for _ in iter(int, 1))
            assert read_slowly(batches, other_postgres) == 400_000
            # A cancel request ends the rest of the result (what is in
            # flight arrives first), and the connection goes on.
            conn.cancel_safe(timeout=10)
            with pytest.raises(psycopg.errors.QueryCanceled):
                for _ in rows:
                    pass
            assert conn.execute("SELECT 1").fetchall() == [(1,)]
    peak = peak_rss_kib(server.proc.pid) / 1024
    print(f"{protocol}: server peak RSS {peak:.0f} MiB")
    assert peak < PEAK_MIB, f"server peak RSS {peak:.0f} MiB"
    assert server.alive()
