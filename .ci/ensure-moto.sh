#!/usr/bin/env bash
# The S3 tests (tests/integration/s3.rs) start moto's S3 server on 127.0.0.1.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
if "$PYTHON" -c "import moto.server, moto.s3" >/dev/null 2>&1; then
  exit 0
fi
echo "installing moto's S3 server (pip install 'moto[server]')" >&2
if "$PYTHON" -m pip install -q 'moto[server]>=5.1,<6' >/dev/null 2>&1 \
  && "$PYTHON" -c "import moto.server, moto.s3" >/dev/null 2>&1; then
  exit 0
fi
cat >&2 <<'MSG'
error: the S3 tests need python3 with moto's server: pip install 'moto[server]'
MSG
exit 1
