#!/usr/bin/env bash
# The Postgres server tests talk to `lance-sql serve --postgres` with psql
# (Debian's postgresql-client), as users do; the TLS tests make their
# certificates with the openssl command.
set -euo pipefail
missing=()
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ "${#missing[@]}" = 0 ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
  command -v psql >/dev/null && command -v openssl >/dev/null
  exit 0
fi
echo "error: the server tests need ${missing[*]}: sudo apt-get install ${missing[*]}" >&2
exit 1
