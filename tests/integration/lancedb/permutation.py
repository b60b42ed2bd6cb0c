"""LanceDB's Python client (PyPI lancedb, the version .ci/ensure-lancedb.sh
installs) and this crate's permutation plans, both ways.

  permutation.py read ROOT BASE PLAN SPLIT...  -> {split: [id, ...]} read by
      LanceDB's Permutation from the plan this crate built
  permutation.py build ROOT BASE               -> builds plans with LanceDB's
      permutation_builder, writes them out as Lance tables ROOT/lancedb_*.lance
      (schema metadata kept) and prints {table: {split: [id, ...]}} as
      LanceDB reads them
"""

import json
import sys

import lancedb
from lancedb.permutation import Permutation, permutation_builder


def ids(permutation):
    return [row["id"] for batch in permutation.iter(batch_size=1000) for row in batch]


def main():
    step, root, base = sys.argv[1], sys.argv[2], sys.argv[3]
    db = lancedb.connect(root)
    base_table = db.open_table(base)
    if step == "read":
        plan, splits = sys.argv[4], sys.argv[5:]
        plan_table = db.open_table(plan)
        out = {s: ids(Permutation.from_tables(base_table, plan_table, s)) for s in splits}
    elif step == "build":
        built = {
            "lancedb_random": permutation_builder(base_table)
            .split_random(ratios=[0.6, 0.4], seed=5, split_names=["a", "b"])
            .shuffle(seed=9)
            .execute(),
            "lancedb_hash": permutation_builder(base_table)
            .split_hash(["id"], [1, 1], discard_weight=1, split_names=["a", "b"])
            .execute(),
        }
        out = {}
        for name, table in built.items():
            written = db.create_table(name, table.to_arrow())
            out[name] = {s: ids(Permutation.from_tables(base_table, written, s)) for s in ["a", "b"]}
    else:
        raise SystemExit(f"unknown step {step}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
