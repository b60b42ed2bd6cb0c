"""LanceDB's own Python client against the fake LanceDB Cloud service.

Run by tests/integration/lancedb_client.rs as

    python3 lancedb_client.py URL API_KEY read|write

`read` opens table `numbers`, counts its rows (all, and those with id < 100)
and queries the rows with id < 10; `write` adds rows 3000..3004 and upserts
ids 1, 2, 3 and 4000 with merge_insert. Prints what it saw as one JSON
object on stdout.
"""

import datetime
import json
import sys

import lancedb
import pyarrow as pa


def main() -> None:
    url, key, step = sys.argv[1:4]
    db = lancedb.connect(
        "db://mydb", api_key=key, host_override=url, region="us-east-1"
    )
    table = db.open_table("numbers")
    out = {"client": lancedb.__version__}
    if step == "read":
        rows = (
            table.search()
            .where("id < 10")
            .select(["id", "s"])
            .limit(1000)
            .to_arrow()
            .to_pylist()
        )
        out["count"] = table.count_rows()
        out["filtered"] = table.count_rows("id < 100")
        out["rows"] = sorted(rows, key=lambda r: r["id"])
        out["version"] = table.version
    elif step == "write":
        schema = table.schema

        def rows(ids, s):
            return pa.table(
                {
                    "id": ids,
                    "v": [float(i) / 2 for i in ids],
                    "s": [f"{s}-{i}" for i in ids],
                    "b": [i % 2 == 0 for i in ids],
                    "d": [datetime.date(2024, 1, 1) for _ in ids],
                },
                schema=schema,
            )

        table.add(rows(list(range(3000, 3005)), "added"))
        merged = (
            table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(rows([1, 2, 3, 4000], "merged"))
        )
        out["merged"] = {
            "inserted": merged.num_inserted_rows,
            "updated": merged.num_updated_rows,
        }
        out["version"] = table.version
    else:
        raise SystemExit(f"unknown step {step!r}")
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
