"""Lance tables in a DataFusion Python context: scans, INSERT, interop."""

from __future__ import annotations

import pathlib
import subprocess

import datafusion
import duckdb
import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import datafusion_lance
from conftest import numbers


def rows(frame: datafusion.DataFrame) -> list[tuple]:
    table = frame.to_arrow_table()
    return [tuple(r.values()) for r in table.to_pylist()]


def lance_rows(result: datafusion_lance.LanceResult) -> list[tuple]:
    return [tuple(r.values()) for r in pa.table(result).to_pylist()]


QUERIES = [
    "SELECT count(*), sum(x), min(id), max(id) FROM t WHERE id >= 1234 AND grp = 'g1'",
    "SELECT grp, count(*) AS n, avg(x) AS a FROM t GROUP BY grp ORDER BY grp",
    "SELECT id, x FROM t WHERE id BETWEEN 2490 AND 2510 ORDER BY id",
]


@pytest.mark.parametrize("query", QUERIES)
def test_scans_answer_as_the_rust_path_and_pyarrow(ctx, table_uri, query):
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    through_ffi = rows(ctx.sql(query))
    through_rust = lance_rows(datafusion_lance.sql(ctx, query))
    assert through_ffi == through_rust
    assert len(through_ffi) > 0
    # pyarrow over the same rows agrees on the first query.
    if query == QUERIES[0]:
        data = lance.dataset(table_uri).to_table()
        mask = pa.compute.and_(
            pa.compute.greater_equal(data["id"], 1234), pa.compute.equal(data["grp"], "g1")
        )
        picked = data.filter(mask)
        assert through_ffi == [
            (
                picked.num_rows,
                pa.compute.sum(picked["x"]).as_py(),
                pa.compute.min(picked["id"]).as_py(),
                pa.compute.max(picked["id"]).as_py(),
            )
        ]


def test_explain_through_ffi_shows_the_crates_scan(table_uri):
    ctx = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(2))
    datafusion_lance.register(ctx)
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    plan = "\n".join(
        str(v) for v in ctx.sql("EXPLAIN SELECT id FROM t WHERE id > 5000").to_pydict()["plan"]
    )
    # The crate's scan, with its fragment groups, named across the FFI.
    assert "FFI_ExecutionPlan: LanceScanExec: uri=" in plan, plan
    assert "partitions=2, fragments=4, projection=[id]" in plan, plan
    # The filter reaches the provider as exact.
    assert "full_filters=[t.id > Int64(5000)]" in plan, plan


def test_insert_through_datafusions_sql_commits_one_version(ctx, table_uri):
    before = lance.dataset(table_uri).version
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    ctx.sql(
        "INSERT INTO t SELECT value + 100000, 0.5, 'new' FROM generate_series(1, 300)"
    ).collect()
    dataset = lance.dataset(table_uri)
    assert dataset.version == before + 1
    assert dataset.count_rows() == 10_300
    assert dataset.count_rows(filter="grp = 'new'") == 300


def test_full_surface_through_the_front_door(ctx, table_uri):
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    v1 = lance.dataset(table_uri).version

    datafusion_lance.sql(ctx, "DELETE FROM t WHERE id < 100")
    assert lance.dataset(table_uri).count_rows() == 9_900
    datafusion_lance.sql(ctx, "UPDATE t SET grp = 'upd' WHERE id < 200")
    assert lance.dataset(table_uri).count_rows(filter="grp = 'upd'") == 100
    datafusion_lance.sql(
        ctx,
        "MERGE INTO t USING (SELECT value AS id, 2.0 AS x, 'm' AS grp "
        "FROM generate_series(9990, 10009)) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET x = s.x, grp = s.grp "
        "WHEN NOT MATCHED THEN INSERT *",
    )
    dataset = lance.dataset(table_uri)
    assert dataset.version == v1 + 3
    assert dataset.count_rows() == 9_910
    assert dataset.count_rows(filter="grp = 'm'") == 20

    # Time travel: the first version, untouched.
    old = lance_rows(datafusion_lance.sql(ctx, f"SELECT count(*) FROM t VERSION AS OF {v1}"))
    assert old == [(10_000,)]

    # An index, then a search.
    datafusion_lance.sql(ctx, "CREATE INDEX id_idx ON t USING BTREE (id)")
    assert [i.name for i in lance.dataset(table_uri).describe_indices()] == ["id_idx"]
    found = lance_rows(datafusion_lance.sql(ctx, "SELECT grp FROM t WHERE id = 10005"))
    assert found == [("m",)]


def test_vector_search_through_both_doors(ctx, tmp_path: pathlib.Path):
    uri = str(tmp_path / "vectors.lance")
    # Row r holds [r, r + 1, r + 2, r + 3]: every distance to the query is
    # distinct, so the 3 nearest are one answer (10, 11, 9), no ties.
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array([float(r + j) for r in range(400) for j in range(4)], pa.float32()), 4
    )
    lance.write_dataset(pa.table({"id": pa.array(range(400), pa.int64()), "v": vectors}), uri)
    ctx.register_table("vecs", datafusion_lance.LanceTable(uri))
    q = [10.2, 11.2, 12.2, 13.2]
    query = f"SELECT id FROM lance_vector_search('vecs', 'v', {q}, 3)"
    through_rust = lance_rows(datafusion_lance.sql(ctx, query))
    expected = lance.dataset(uri).to_table(nearest={"column": "v", "q": q, "k": 3}, columns=["id"])
    assert through_rust == [(10,), (11,), (9,)]
    assert [r[0] for r in through_rust] == expected["id"].to_pylist()
    # Through DataFusion's own SQL, a search names no table it can find
    # (the FFI session has no catalog of this crate): a clear error.
    with pytest.raises(Exception, match="is not a registered Lance table"):
        ctx.sql(query).collect()
    # Functions that take a location work there.
    versions = rows(ctx.sql(f"SELECT count(*) FROM lance_versions('{uri}')"))
    assert versions == [(1,)]
    # l2_distance is Lance's squared L2.
    distance = rows(ctx.sql("SELECT l2_distance([0.0, 0.0], [3.0, 4.0])"))
    assert distance == [(25.0,)]


def test_results_stream_to_pyarrow_and_duckdb(ctx, table_uri):
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    result = datafusion_lance.sql(ctx, "SELECT id, x FROM t")
    reader = pa.RecordBatchReader.from_stream(result)
    assert reader.schema.names == ["id", "x"]
    total = sum(batch.num_rows for batch in reader)
    assert total == 10_000
    with pytest.raises(datafusion_lance.LanceError, match="already read"):
        pa.table(result)

    # DuckDB reads the result itself, through its Arrow C stream.
    stream = datafusion_lance.sql(ctx, "SELECT id, grp FROM t")
    counted = duckdb.sql("SELECT grp, count(*) FROM stream GROUP BY grp ORDER BY grp").fetchall()
    assert counted == [("g0", 3334), ("g1", 3333), ("g2", 3333)]


def test_a_lance_table_next_to_a_parquet_table(ctx, table_uri, tmp_path: pathlib.Path):
    names = pa.table({"grp": ["g0", "g1", "g2"], "label": ["zero", "one", "two"]})
    pq.write_table(names, tmp_path / "names.parquet")
    ctx.register_parquet("names", str(tmp_path / "names.parquet"))
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    joined = rows(
        ctx.sql(
            "SELECT n.label, count(*) FROM t JOIN names n ON t.grp = n.grp "
            "WHERE t.id < 9 GROUP BY n.label ORDER BY n.label"
        )
    )
    assert joined == [("one", 3), ("two", 3), ("zero", 3)]


def test_bad_input_raises_clearly_and_changes_nothing(ctx, table_uri, tmp_path):
    before = lance.dataset(table_uri).version
    with pytest.raises(datafusion_lance.LanceError, match="nowhere.lance"):
        datafusion_lance.LanceTable(str(tmp_path / "nowhere.lance"))
    with pytest.raises(datafusion_lance.LanceError, match="lance.bogus"):
        datafusion_lance.LanceTable(table_uri, options={"lance.bogus": "1"})
    with pytest.raises(TypeError, match="version"):
        datafusion_lance.LanceTable(table_uri, version=1.5)
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    with pytest.raises(datafusion_lance.LanceError, match="nope"):
        datafusion_lance.sql(ctx, "UPDATE t SET nope = 1")
    with pytest.raises(datafusion_lance.LanceError, match="occurs more than once in the source"):
        datafusion_lance.sql(
            ctx,
            "MERGE INTO t USING (SELECT 1 AS id, 1.0 AS x, 'a' AS grp UNION ALL "
            "SELECT 1, 2.0, 'b') AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x",
        )
    assert lance.dataset(table_uri).version == before
    assert lance.dataset(table_uri).count_rows() == 10_000


def test_a_table_at_a_version(ctx, table_uri):
    first = lance.dataset(table_uri).version
    lance.write_dataset(numbers(10), table_uri, mode="append")
    ctx.register_table("old", datafusion_lance.LanceTable(table_uri, version=first))
    ctx.register_table("new", datafusion_lance.LanceTable(table_uri))
    assert rows(ctx.sql("SELECT count(*) FROM old")) == [(10_000,)]
    assert rows(ctx.sql("SELECT count(*) FROM new")) == [(10_010,)]


def test_catalog_tables_created_and_read_from_python(ctx, tmp_path: pathlib.Path):
    root = tmp_path / "lake"
    root.mkdir()
    ctx.register_catalog_provider("lake", datafusion_lance.LanceCatalog(str(root)))
    datafusion_lance.sql(
        ctx, "CREATE TABLE lake.public.events AS SELECT value AS id FROM generate_series(1, 50)"
    )
    assert rows(ctx.sql("SELECT count(*), sum(id) FROM lake.public.events")) == [(50, 1275)]
    assert lance.dataset(str(root / "events.lance")).count_rows() == 50


def test_tables_cross_between_python_and_lance_sql(ctx, tmp_path, lance_sql):
    ours = str(tmp_path / "from_python.lance")
    datafusion_lance.sql(
        ctx,
        f"COPY (SELECT value AS id FROM generate_series(1, 40)) TO '{ours}' STORED AS LANCE",
    )
    out = subprocess.run(
        [lance_sql, "-q", "--format", "csv", "-c", f"SELECT count(*) AS n FROM '{ours}'"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout == "n\n40\n"
    theirs = str(tmp_path / "from_cli.lance")
    subprocess.run(
        [
            lance_sql,
            "-q",
            "-c",
            f"COPY (SELECT value AS id FROM generate_series(1, 7)) TO '{theirs}' STORED AS LANCE",
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    ctx.register_table("cli", datafusion_lance.LanceTable(theirs))
    assert rows(ctx.sql("SELECT count(*), sum(id) FROM cli")) == [(7, 28)]


def test_maintenance_functions_run_through_datafusions_sql(ctx, table_uri):
    # register(ctx) brought lance_optimize; 4 fragments of 2,500 rows become one.
    compacted = rows(
        ctx.sql(f"SELECT fragments_removed, fragments_added FROM lance_optimize('{table_uri}')")
    )
    assert compacted == [(4, 1)]
    dataset = lance.dataset(table_uri)
    assert len(dataset.get_fragments()) == 1
    assert dataset.count_rows() == 10_000


def test_every_table_shares_the_process_lance_session(table_uri):
    def stats(context) -> dict:
        result = datafusion_lance.sql(context, "SELECT lance_session_stats() AS s")
        return pa.table(result).to_pylist()[0]["s"]

    contexts = [datafusion.SessionContext() for _ in range(2)]
    for context in contexts:
        datafusion_lance.register(context)
    before = stats(contexts[0])
    for context in contexts:
        context.register_table("t", datafusion_lance.LanceTable(table_uri))
        assert rows(context.sql("SELECT count(*) FROM t")) == [(10_000,)]
    after = stats(contexts[1])
    # Two contexts, each opening the table: its manifest is loaded once, the
    # other opens reuse what the process's session holds.
    assert after["opens"] - before["opens"] >= 2
    assert after["loads"] - before["loads"] == 1
    assert after["reused"] - before["reused"] >= 1


def test_alter_table_and_drop_index_through_the_front_door(ctx, table_uri):
    ctx.register_table("t", datafusion_lance.LanceTable(table_uri))
    v1 = lance.dataset(table_uri).version
    datafusion_lance.sql(ctx, "ALTER TABLE t ADD COLUMN half DOUBLE AS (x * 0.5)")
    datafusion_lance.sql(ctx, "CREATE INDEX id_idx ON t USING BTREE (id)")
    datafusion_lance.sql(ctx, "DROP INDEX id_idx ON t")
    dataset = lance.dataset(table_uri)
    assert dataset.version == v1 + 3
    assert dataset.schema.names == ["id", "x", "grp", "half"]
    assert dataset.to_table(filter="id = 8", columns=["half"]).column("half").to_pylist() == [6.0]
    assert dataset.describe_indices() == []
    # The registered table answers with the new column.
    assert lance_rows(datafusion_lance.sql(ctx, "SELECT half FROM t WHERE id = 8")) == [(6.0,)]
