#!/usr/bin/env bash
# The virtual environment the Python package is built into and tested in
# (`make python`, `make python-test`): maturin, DataFusion's Python bindings
# at the exact version this crate's FFI speaks, pyarrow, and what the tests
# compare with (pylance, DuckDB, pytest), and the clients the server tests
# use (ADBC's Flight SQL driver, psycopg). Created when missing.
set -euo pipefail
VENV="${1:?usage: ensure-python-venv.sh VENV}"
PYTHON="${PYTHON:-python3}"
REQUIREMENTS=(
  "maturin>=1.7,<2"
  "datafusion==54.1.0"
  "pyarrow>=14"
  "pytest>=7"
  "pytest-timeout>=2"
  "pylance==14.0.2"
  "duckdb>=1.1"
  "adbc-driver-manager>=1.3"
  "adbc-driver-flightsql>=1.3"
  "psycopg[binary]>=3.1"
)
have() {
  [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/maturin" ] &&
    "$VENV/bin/python" - >/dev/null 2>&1 <<'PY'
import importlib.metadata as m
import sys
need = {"datafusion": "54.1.0", "pylance": "14.0.2"}
for name, version in need.items():
    if m.version(name) != version:
        sys.exit(1)
import adbc_driver_flightsql, duckdb, lance, psycopg, pyarrow, pytest, pytest_timeout  # noqa: F401,E401
PY
}
if have; then
  exit 0
fi
echo "setting up $VENV (pip install ${REQUIREMENTS[*]})" >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
if "$VENV/bin/python" -m pip install -q "${REQUIREMENTS[@]}" >/dev/null && have; then
  exit 0
fi
echo "error: could not set up $VENV with ${REQUIREMENTS[*]}" >&2
exit 1
