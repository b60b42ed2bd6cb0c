"""Fixtures: a fresh context with this package registered, and tables made by pylance."""

from __future__ import annotations

import os
import pathlib

import datafusion
import lance
import pyarrow as pa
import pytest

import datafusion_lance


@pytest.fixture
def ctx() -> datafusion.SessionContext:
    context = datafusion.SessionContext()
    datafusion_lance.register(context)
    return context


def numbers(n: int) -> pa.Table:
    """Rows ``id`` 0..n-1, ``x`` = id * 1.5, ``grp`` = 'g' + id % 3."""
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "x": pa.array([i * 1.5 for i in range(n)], pa.float64()),
            "grp": pa.array([f"g{i % 3}" for i in range(n)]),
        }
    )


@pytest.fixture
def table_uri(tmp_path: pathlib.Path) -> str:
    """A 10,000-row table of 4 fragments, written by pylance."""
    uri = str(tmp_path / "numbers.lance")
    lance.write_dataset(numbers(10_000), uri, max_rows_per_file=2_500)
    return uri


@pytest.fixture
def lance_sql() -> str:
    """The lance-sql binary `make python-test` built."""
    path = os.environ.get("LANCE_SQL_BIN", "")
    if not path or not os.path.exists(path):
        pytest.skip("LANCE_SQL_BIN is not set (make python-test sets it)")
    return path
