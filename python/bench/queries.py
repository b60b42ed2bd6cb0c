"""Q6-like and Q1-like over the bench table from Python (``make bench-python``).

Sides, each in a fresh ``datafusion.SessionContext`` per run, interleaved,
5 runs each (median, min–max):

* ``datafusion_lance.LanceTable`` through DataFusion's own ``ctx.sql`` (FFI);
* pylance's own FFI provider (``lance.FFILanceTableProvider``), same session;
* ``lance.dataset(...).to_table(columns, filter)`` + pyarrow compute;
* the same rows in Parquet, read by DataFusion's Python bindings alone (no
  FFI) and by this crate's engine (``datafusion_lance.sql``): where the FFI
  overhead goes — the Python side's own DataFusion vs the crossing;
* the same SQL through ``datafusion_lance.sql`` (this crate's engine, in Rust,
  in the same process): the FFI overhead is ours ÷ this.

Ratio convention: time ÷ baseline time.
"""

from __future__ import annotations

import datetime
import pathlib
import statistics
import sys
import time

import datafusion
import lance
import pyarrow as pa
import pyarrow.compute as pc

import datafusion_lance

# The queries benches/server.py runs too.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benches"))
from lineitem_queries import Q1, Q6  # noqa: E402

RUNS = 5


def ours_ffi(uri: str, query: str) -> pa.Table:
    ctx = datafusion.SessionContext()
    ctx.register_table("lineitem", datafusion_lance.LanceTable(uri))
    return ctx.sql(query).to_arrow_table()


def pylance_ffi(uri: str, query: str) -> pa.Table:
    ctx = datafusion.SessionContext()
    ctx.register_table("lineitem", lance.FFILanceTableProvider(lance.dataset(uri)))
    return ctx.sql(query).to_arrow_table()


def python_parquet(parquet: str, query: str) -> pa.Table:
    ctx = datafusion.SessionContext()
    ctx.register_parquet("lineitem", parquet)
    return ctx.sql(query).to_arrow_table()


def rust_parquet(parquet: str, query: str) -> pa.Table:
    ctx = datafusion.SessionContext()
    datafusion_lance.register(ctx)
    datafusion_lance.sql(ctx, f"CREATE EXTERNAL TABLE lineitem STORED AS PARQUET LOCATION '{parquet}'")
    return pa.table(datafusion_lance.sql(ctx, query))


def ours_rust(uri: str, query: str) -> pa.Table:
    ctx = datafusion.SessionContext()
    datafusion_lance.register(ctx)
    ctx.register_table("lineitem", datafusion_lance.LanceTable(uri))
    return pa.table(datafusion_lance.sql(ctx, query))


def pylance_pyarrow(uri: str, query: str) -> pa.Table:
    ds = lance.dataset(uri)
    if query is Q6:
        t = ds.to_table(
            columns=["l_extendedprice", "l_discount"],
            filter="l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01' "
            "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
        )
        revenue = pc.sum(pc.multiply(t["l_extendedprice"], t["l_discount"]))
        return pa.table({"revenue": [revenue.as_py()]})
    t = ds.to_table(
        columns=[
            "l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice",
            "l_discount", "l_tax",
        ],
        filter="l_shipdate <= date '1998-09-02'",
    )
    disc = pc.multiply(t["l_extendedprice"], pc.subtract(1, t["l_discount"]))
    t = t.append_column("disc_price", disc).append_column(
        "charge", pc.multiply(disc, pc.add(1, t["l_tax"]))
    )
    grouped = t.group_by(["l_returnflag", "l_linestatus"]).aggregate(
        [
            ("l_quantity", "sum"), ("l_extendedprice", "sum"), ("disc_price", "sum"),
            ("charge", "sum"), ("l_quantity", "mean"), ("l_extendedprice", "mean"),
            ("l_discount", "mean"), ("l_quantity", "count"),
        ]
    )
    ordered = grouped.select(
        [
            "l_returnflag", "l_linestatus", "l_quantity_sum", "l_extendedprice_sum",
            "disc_price_sum", "charge_sum", "l_quantity_mean", "l_extendedprice_mean",
            "l_discount_mean", "l_quantity_count",
        ]
    )
    return ordered.sort_by([("l_returnflag", "ascending"), ("l_linestatus", "ascending")])


def answer(table: pa.Table) -> list[float]:
    """The numbers of a Q6 (revenue) or Q1 (first sum and count per group) answer."""
    if table.num_columns == 1:
        return [float(table.column(0)[0].as_py())]
    return [float(v) for v in table.column(2).to_pylist() + table.column(table.num_columns - 1).to_pylist()]


# (name, what it reads, run): the last is the baseline.
SIDES = [
    ("datafusion_lance.LanceTable, ctx.sql (FFI)", "lance", ours_ffi),
    ("lance.FFILanceTableProvider, ctx.sql (FFI)", "lance", pylance_ffi),
    ("lance to_table + pyarrow compute", "lance", pylance_pyarrow),
    ("Parquet, datafusion's ctx.sql (Python bindings, no FFI)", "parquet", python_parquet),
    ("Parquet, datafusion_lance.sql (Rust engine)", "parquet", rust_parquet),
    ("datafusion_lance.sql (Rust engine, same process)", "lance", ours_rust),
]


def main(uri: str, parquet: str) -> None:
    print(f"\nFrom Python: {uri} ({lance.dataset(uri).count_rows()} rows), "
          f"{RUNS} interleaved runs per side, median (min–max) s; "
          f"ratio = time ÷ the Rust engine's time; {datetime.date.today()}\n")
    for name, query in [("Q6", Q6), ("Q1", Q1)]:
        times: dict[str, list[float]] = {side: [] for side, _, _ in SIDES}
        answers: dict[str, list] = {}
        for _ in range(RUNS):
            for side, reads, run in SIDES:
                start = time.perf_counter()
                table = run(uri if reads == "lance" else parquet, query)
                times[side].append(time.perf_counter() - start)
                answers[side] = answer(table)
        # Every side answers the same (sums to 1e-9, relative).
        first = next(iter(answers.values()))
        for side, values in answers.items():
            assert len(values) == len(first), (side, values, first)
            for a, b in zip(values, first):
                assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), (side, values, first)
        base = statistics.median(times[SIDES[-1][0]])
        print(f"| {name} | median s | min–max | ÷ Rust engine |")
        print("|---|---|---|---|")
        for side, _, _ in SIDES:
            t = times[side]
            print(f"| {side} | {statistics.median(t):.3f} | {min(t):.3f}–{max(t):.3f} | "
                  f"{statistics.median(t) / base:.2f}× |")
        print()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
