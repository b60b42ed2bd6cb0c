# datafusion-lance: every command CI runs is a target here.
.DEFAULT_GOAL := help
CARGO ?= cargo
DEMO_DIR ?= target/demo

.PHONY: help protoc s3-server lancedb-client run build test test-nightly lint fmt check-fmt clippy check-lean unit slt slt-complete bench bench-python bench-server doc python python-test server-test

# The Python package's virtual environment (make python VENV=...).
VENV ?= target/python-venv
VENV_ABS = $(abspath $(VENV))
TARGET_DIR = $(or $(CARGO_TARGET_DIR),target)

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  make %-14s %s\n", $$1, $$2}'

protoc: ## Install protoc if missing (apt-get as root; otherwise explain)
	@.ci/ensure-protoc.sh

s3-server: ## Install moto's S3 server for the S3 tests if missing (pip)
	@.ci/ensure-moto.sh

lancedb-client: ## Install LanceDB's Python client for the db:// dialect test if missing (pip)
	@.ci/ensure-lancedb.sh

run: protoc ## Build, create a demo Lance dataset under target/demo, run examples/demo.sql
	$(CARGO) build --bin lance-sql
	$(CARGO) run --example make_demo -- $(DEMO_DIR)
	$(CARGO) run --bin lance-sql -- --format table -f examples/demo.sql

build: protoc ## Build the library and the lance-sql CLI
	$(CARGO) build --bins

test: protoc check-fmt clippy check-lean doc unit python-test server-test ## Everything CI runs: fmt check, clippy, the lean library, API docs, unit + integration tests, sqllogictests, the Python package's tests, the server's tests with real clients

test-nightly: protoc s3-server lancedb-client check-fmt clippy ## The big tier: make test with 20 process kills and 2,000 fuzzed predicates
	DATAFUSION_LANCE_NIGHTLY=1 $(CARGO) test

lint: protoc check-fmt clippy ## fmt check and clippy -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

check-fmt: ## Check formatting
	$(CARGO) fmt --all -- --check

clippy: protoc ## Clippy on every target (the Python package's crate too), warnings are errors
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy -p datafusion-lance-python -- -D warnings

check-lean: protoc ## The library alone, as embedders take it (default-features = false), compiles
	$(CARGO) check --lib --no-default-features

unit: protoc s3-server lancedb-client ## Unit tests, integration tests and the sqllogictest suite
	$(CARGO) test

slt: protoc ## Only the sqllogictest suite (make slt F=scan/filters to filter)
	$(CARGO) test --test sqllogictests -- $(F)

slt-complete: protoc ## Regenerate expected output of .slt files (F=... to filter)
	$(CARGO) test --test sqllogictests -- --complete $(F)

bench: protoc ## Release benchmarks; prints the tables quoted in README.md
	$(CARGO) bench --bench lance
	$(MAKE) bench-python
	$(MAKE) bench-server

bench-python: protoc ## Q6/Q1-like from Python: this package (release) vs pylance's FFI provider and pyarrow (after make bench made the data)
	@.ci/ensure-python-venv.sh $(VENV)
	cd python && VIRTUAL_ENV=$(VENV_ABS) PATH=$(VENV_ABS)/bin:$$PATH maturin develop --release --quiet
	$(VENV_ABS)/bin/python python/bench/queries.py target/bench-data/lineitem-v2.1-10000000.lance target/bench-data/lineitem-10000000.parquet

bench-server: protoc ## lance-sql serve (release) through ADBC and psycopg vs lance-sql -c: Q6/Q1, rows/s, point-lookup QPS (after make bench made the data)
	@.ci/ensure-python-venv.sh $(VENV)
	$(CARGO) build --release --bin lance-sql
	$(VENV_ABS)/bin/python benches/server.py $(abspath $(TARGET_DIR))/release/lance-sql target/bench-data/lineitem-v2.1-10000000.lance

python: protoc ## Build the Python package (maturin, debug) and install it into $(VENV) with datafusion==54.1.0 and pyarrow
	@.ci/ensure-python-venv.sh $(VENV)
	cd python && VIRTUAL_ENV=$(VENV_ABS) PATH=$(VENV_ABS)/bin:$$PATH maturin develop --quiet

python-test: python ## pytest of the Python package (against lance-sql and pylance too)
	$(CARGO) build --bin lance-sql
	cd python && LANCE_SQL_BIN=$(abspath $(TARGET_DIR))/debug/lance-sql $(VENV_ABS)/bin/python -m pytest -q tests

server-test: protoc ## lance-sql serve through real clients (ADBC Flight SQL and psycopg from the venv, psql), on loopback, TLS and a cluster included
	@.ci/ensure-python-venv.sh $(VENV)
	@.ci/ensure-psql.sh
	$(CARGO) build --bin lance-sql --bin lance-cluster
	cd tests/clients && LANCE_SQL_BIN=$(abspath $(TARGET_DIR))/debug/lance-sql LANCE_CLUSTER_BIN=$(abspath $(TARGET_DIR))/debug/lance-cluster $(VENV_ABS)/bin/python -m pytest -q -p no:cacheprovider --timeout 300 .

doc: protoc ## API docs of the library, warnings are errors
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --lib
