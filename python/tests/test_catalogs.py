"""Catalogs from Python: a Lance REST namespace server (pylance's RestAdapter)
and a LanceDB database (``db://``, on a fake of the Cloud data plane), each
written through this package and read back by Lance's own clients."""

from __future__ import annotations

import pathlib

import datafusion
import lance
import pyarrow as pa
import pytest
from lance.namespace import RestAdapter, RestNamespace

import datafusion_lance
from conftest import numbers
from fake_cloud import API_KEY, FakeCloud


def rows(df) -> list[tuple]:
    table = df.to_arrow_table() if hasattr(df, "to_arrow_table") else pa.table(df)
    return [tuple(r.values()) for r in table.to_pylist()]


@pytest.fixture
def rest_server(tmp_path: pathlib.Path):
    """Lance's REST namespace server over a directory, on 127.0.0.1."""
    root = tmp_path / "rest"
    root.mkdir()
    with RestAdapter("dir", {"root": str(root)}, host="127.0.0.1", port=0) as adapter:
        yield f"http://127.0.0.1:{adapter.port}"


def test_a_rest_namespace_is_a_catalog(ctx, rest_server):
    client = RestNamespace(uri=rest_server)
    lance.write_dataset(numbers(300), namespace_client=client, table_id=["numbers"], mode="create")
    ctx.register_catalog_provider("lake", datafusion_lance.LanceCatalog(f"rest+{rest_server}"))
    # Read through DataFusion's own SQL (the catalog crosses FFI) and through
    # this package's front door.
    assert rows(ctx.sql("SELECT count(*), sum(id) FROM lake.public.numbers")) == [(300, 44_850)]
    assert rows(datafusion_lance.sql(ctx, "SELECT count(*) FROM lake.public.numbers WHERE id < 10")) == [
        (10,)
    ]
    # CTAS and DML through the front door; Lance's REST client reads them.
    datafusion_lance.sql(
        ctx, "CREATE TABLE lake.public.events AS SELECT value AS id FROM generate_series(1, 50)"
    )
    datafusion_lance.sql(ctx, "DELETE FROM lake.public.numbers WHERE id >= 100")
    datafusion_lance.sql(ctx, "INSERT INTO lake.public.events VALUES (51), (52)")
    events = lance.dataset(namespace_client=client, table_id=["events"])
    assert (events.count_rows(), events.version) == (52, 2)
    table = lance.dataset(namespace_client=client, table_id=["numbers"])
    assert (table.count_rows(), table.version) == (100, 2)
    # INSERT through DataFusion's own SQL commits one version.
    ctx.sql("INSERT INTO lake.public.numbers SELECT id + 1000, x, grp FROM lake.public.numbers").collect()
    table = lance.dataset(namespace_client=client, table_id=["numbers"])
    assert (table.count_rows(), table.version) == (200, 3)
    names = rows(
        datafusion_lance.sql(
            ctx,
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_catalog = 'lake' AND table_schema = 'public' ORDER BY 1",
        )
    )
    assert names == [("events",), ("numbers",)]
    # Time travel in a catalog table.
    assert rows(
        datafusion_lance.sql(ctx, "SELECT count(*) FROM lake.public.numbers VERSION AS OF 1")
    ) == [(300,)]


def test_an_unreachable_rest_namespace_fails_naming_it(ctx, tmp_path):
    # A port nobody listens on: take one, then close it.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    catalog = datafusion_lance.LanceCatalog(f"rest+http://127.0.0.1:{port}")
    with pytest.raises(Exception) as e:
        ctx.register_catalog_provider("gone", catalog)
    assert f"127.0.0.1:{port}" in str(e.value), str(e.value)


@pytest.fixture
def cloud(tmp_path: pathlib.Path):
    root = tmp_path / "cloud"
    root.mkdir()
    fake = FakeCloud(str(root))
    lance.write_dataset(numbers(941), str(root / "numbers.lance"))
    yield fake
    fake.close()


def test_a_lancedb_database_is_a_catalog(ctx, cloud):
    ctx.register_catalog_provider("cloud", datafusion_lance.LanceCatalog("db://mydb", options=cloud.options()))
    assert rows(ctx.sql("SELECT count(*), sum(id) FROM cloud.public.numbers")) == [(941, 442_270)]
    assert any(r.endswith("/query") for r in cloud.requests), cloud.requests
    # Writes go as the service's requests; its directory shows them.
    datafusion_lance.sql(
        ctx, "CREATE TABLE cloud.public.events AS SELECT value AS id FROM generate_series(1, 50)"
    )
    assert lance.dataset(str(pathlib.Path(cloud.root) / "events.lance")).count_rows() == 50
    datafusion_lance.sql(ctx, "UPDATE cloud.public.numbers SET x = -1 WHERE id < 10")
    datafusion_lance.sql(ctx, "DELETE FROM cloud.public.numbers WHERE id >= 900")
    datafusion_lance.sql(
        ctx,
        "MERGE INTO cloud.public.numbers AS t USING (SELECT 5 AS id, 2.5 AS x, 'm' AS grp "
        "UNION ALL SELECT 5000, 7.5, 'm') AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    )
    local = lance.dataset(str(pathlib.Path(cloud.root) / "numbers.lance"))
    assert local.count_rows() == 901
    assert local.count_rows("x = -1") == 9
    assert local.to_table(filter="id IN (5, 5000)").sort_by("id").to_pylist() == [
        {"id": 5, "x": 2.5, "grp": "m"},
        {"id": 5000, "x": 7.5, "grp": "m"},
    ]
    assert rows(datafusion_lance.sql(ctx, "SELECT count(*) FROM cloud.public.numbers")) == [(901,)]
    # A single db:// table through CREATE EXTERNAL TABLE, at an old version.
    datafusion_lance.sql(
        ctx,
        "CREATE EXTERNAL TABLE old STORED AS LANCE LOCATION 'db://mydb/numbers' "
        f"OPTIONS ('api_key' '{API_KEY}', 'host_override' '{cloud.url}', 'lance.version' '1')",
    )
    assert rows(datafusion_lance.sql(ctx, "SELECT count(*), sum(id) FROM old")) == [(941, 442_270)]


def test_a_wrong_api_key_is_refused_without_showing_it(cloud):
    ctx = datafusion.SessionContext()
    datafusion_lance.register(ctx)
    secret = "sk-wrong-python-secret"
    catalog = datafusion_lance.LanceCatalog("db://mydb", options=cloud.options(api_key=secret))
    with pytest.raises(Exception) as e:
        ctx.register_catalog_provider("cloud", catalog)
    message = str(e.value)
    assert "'db://mydb'" in message and "Unauthenticated: invalid API key" in message, message
    assert secret not in message and secret not in repr(catalog)


def test_a_lancedb_table_registered_from_python(ctx, cloud, monkeypatch):
    monkeypatch.delenv("LANCEDB_API_KEY", raising=False)
    path = str(pathlib.Path(cloud.root) / "numbers.lance")
    lance.write_dataset(numbers(5), path, mode="append")
    table = datafusion_lance.LanceTable("db://mydb/numbers", options=cloud.options())
    assert (table.uri, table.schema.names) == ("db://mydb/numbers", ["id", "x", "grp"])
    ctx.register_table("latest", table)
    ctx.register_table("first", datafusion_lance.LanceTable("db://mydb/numbers", version=1, options=cloud.options()))
    assert rows(ctx.sql("SELECT (SELECT count(*) FROM latest) AS a, (SELECT count(*) FROM first) AS b")) == [(946, 941)]
    # INSERT through DataFusion's own SQL: one insert request, one version.
    cloud.requests.clear()
    ctx.sql("INSERT INTO latest VALUES (100000, 1.0, 'z')").collect()
    assert [r for r in cloud.requests if r.endswith("/insert")] == ["POST /v1/table/numbers/insert"]
    local = lance.dataset(path)
    assert (local.count_rows(), local.version) == (947, 3)
    with pytest.raises(ValueError, match=r"not a tag \('t1'\)"):
        datafusion_lance.LanceTable("db://mydb/numbers", version="t1", options=cloud.options())
    with pytest.raises(datafusion_lance.LanceError, match="no API key"):
        datafusion_lance.LanceTable("db://mydb/numbers", options={"host_override": cloud.url})
