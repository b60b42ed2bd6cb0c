#!/usr/bin/env bash
# The LanceDB client test (tests/integration/lancedb_client.rs) drives the
# fake LanceDB Cloud service with LanceDB's own Python client.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
VERSION="0.40.0"
have() {
  "$PYTHON" -c "import lancedb, sys; sys.exit(lancedb.__version__ != '$VERSION')" >/dev/null 2>&1
}
if have; then
  exit 0
fi
echo "installing LanceDB's Python client (pip install lancedb==$VERSION)" >&2
if "$PYTHON" -m pip install -q "lancedb==$VERSION" >/dev/null 2>&1 && have; then
  exit 0
fi
cat >&2 <<MSG
error: the LanceDB client test needs python3 with lancedb $VERSION: pip install lancedb==$VERSION
MSG
exit 1
