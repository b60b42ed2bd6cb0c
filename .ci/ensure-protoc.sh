#!/usr/bin/env bash
# Lance's build needs protoc and the protobuf well-known types.
set -euo pipefail
if command -v protoc >/dev/null 2>&1 && [ -e /usr/include/google/protobuf/empty.proto -o -n "${PROTOC_INCLUDE:-}" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing protoc (protobuf-compiler, libprotobuf-dev) with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null; }
  command -v protoc >/dev/null
  exit 0
fi
cat >&2 <<'MSG'
error: protoc (the Protocol Buffers compiler) is required to build Lance.
Install it, then re-run:
  Debian/Ubuntu: sudo apt-get install protobuf-compiler libprotobuf-dev
  macOS:         brew install protobuf
or point PROTOC at a protoc binary (and PROTOC_INCLUDE at its include directory).
MSG
exit 1
