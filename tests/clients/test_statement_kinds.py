"""Statement kinds beyond queries and DML, through both protocols: `SET
lance.*`, `COPY … STORED AS LANCE`, `CREATE TABLE … AS` in a catalog,
`lance_merge`, `CREATE INDEX`, `lance_vector_search`, `lance_optimize`.
Each answer, and what each did to the tables, is read back with pylance."""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as flight_sql
import lance
import psycopg
import pyarrow as pa
import pytest

COOKIES = {"adbc.flight.sql.rpc.with_cookie_middleware": "true"}


class Flight:
    def __init__(self, server):
        self.conn = flight_sql.connect(server.uri, db_kwargs=COOKIES)
        self.cur = self.conn.cursor()

    def rows(self, sql: str) -> list[tuple]:
        self.cur.execute(sql)
        return [tuple(row) for row in self.cur.fetchall()]

    def close(self):
        self.cur.close()
        self.conn.close()


class Postgres:
    def __init__(self, server):
        self.conn = psycopg.connect(host="127.0.0.1", port=server.pg_port, user="me", dbname="d",
                                    autocommit=True, connect_timeout=10)

    def rows(self, sql: str) -> list[tuple]:
        cur = self.conn.execute(sql)
        return cur.fetchall() if cur.description else []

    def close(self):
        self.conn.close()


@pytest.mark.parametrize("protocol", [Flight, Postgres], ids=["flight_sql", "postgres"])
def test_every_statement_kind_runs_through_the_front_door(serve, data_dir, protocol):
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array([v for i in range(100) for v in (float(i), 0.0)], pa.float32()), 2
    )
    lance.write_dataset(pa.table({"id": pa.array(range(100), pa.int64()), "emb": vectors}),
                        str(data_dir / "v.lance"))
    (data_dir / "lake").mkdir()
    server = serve("--catalog", f"lake={data_dir / 'lake'}")
    client = protocol(server)
    try:
        client.rows("CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance'")
        # A session setting reaches the write: 2,500 rows in files of 1,000.
        client.rows("SET lance.max_rows_per_file = 1000")
        client.rows("COPY (SELECT * FROM t WHERE id < 2500) TO 'copied.lance' STORED AS LANCE")
        copied = lance.dataset(str(data_dir / "copied.lance"))
        assert copied.count_rows() == 2_500
        assert len(copied.get_fragments()) == 3

        client.rows("CREATE TABLE lake.public.c AS SELECT id, x FROM t WHERE id < 100")
        assert client.rows("SELECT count(*), sum(id) FROM lake.public.c") == [(100, 4_950)]

        # Two rows updated, three inserted: one version.
        client.rows(
            "SELECT * FROM lance_merge('t', (SELECT id, x + 1 AS x, grp FROM t WHERE id >= 9998 "
            "UNION ALL SELECT id + 20000 AS id, x, grp FROM t WHERE id < 3), 'id')"
        )
        merged = lance.dataset(str(data_dir / "numbers.lance"))
        assert merged.version == 2
        assert merged.count_rows() == 10_003
        assert merged.to_table(filter="id = 9999").column("x").to_pylist() == [9999 * 1.5 + 1]

        client.rows("CREATE INDEX id_idx ON t USING BTREE (id)")
        indexed = lance.dataset(str(data_dir / "numbers.lance"))
        assert indexed.version == 3
        assert [i.name for i in indexed.describe_indices()] == ["id_idx"]

        client.rows("CREATE EXTERNAL TABLE v STORED AS LANCE LOCATION 'v.lance'")
        assert client.rows(
            "SELECT id FROM lance_vector_search('v', 'emb', [10.2, 0.0], 3)"
        ) == [(10,), (11,), (9,)]

        assert client.rows(
            "SELECT fragments_removed, fragments_added FROM lance_optimize('copied.lance')"
        ) == [(3, 1)]
        compacted = lance.dataset(str(data_dir / "copied.lance"))
        assert len(compacted.get_fragments()) == 1
        assert compacted.count_rows() == 2_500
    finally:
        client.close()


def test_startup_files_run_in_every_session(serve, data_dir):
    init = data_dir / "init.sql"
    init.write_text(
        "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION 'numbers.lance';\n"
        "SET lance.max_rows_per_file = 1000;\n"
    )
    server = serve("-r", str(init))
    # Each connection is a session of its own, made with the file run in it.
    for protocol in (Flight, Postgres, Flight):
        client = protocol(server)
        try:
            assert client.rows("SELECT count(*) FROM t") == [(10_000,)]
            assert client.rows("SELECT value FROM information_schema.df_settings "
                               "WHERE name = 'lance.max_rows_per_file'") == [("1000",)]
        finally:
            client.close()
