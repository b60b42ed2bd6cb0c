#!/usr/bin/env bash
# The Postgres server tests talk to `lance-sql serve --postgres` with psql
# (Debian's postgresql-client), as users do.
set -euo pipefail
if command -v psql >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing psql (postgresql-client) with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q postgresql-client >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q postgresql-client >/dev/null; }
  command -v psql >/dev/null
  exit 0
fi
echo "error: psql is required for the server tests: sudo apt-get install postgresql-client" >&2
exit 1
