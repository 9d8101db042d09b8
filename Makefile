# switchyard — developer and CI entry points.
#
#   make run          build, start the mock upstream on 127.0.0.1:8081 and the
#                     gateway with config.example.yaml (foreground; Ctrl-C stops both)
#   make test         build everything, Rust tests, Python SDK tests, fmt + clippy
#   make check        validate config.example.yaml with `switchyard check`
#   make lint         cargo fmt --check, cargo clippy -D warnings, shellcheck
#   make bench        load benchmarks (benches/run.sh); PEERS=litellm adds LiteLLM's proxy
#   make soak         chaos soak of the real binary (SOAK_DURATION=60s, SOAK_CONCURRENCY=32)
#   make clients      real Claude Code, Codex, OpenCode, aider through the gateway (scripts/clients.sh)
#   make fuzz         fuzzers (fuzz/run.sh)
#   make clean        remove build output, the Python venv and the demo database

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO      ?= cargo
PYTHON     ?= python3
VENV       ?= .venv
CONFIG     ?= config.example.yaml
MOCK_LISTEN ?= 127.0.0.1:8081
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
GATEWAY_BIN := $(TARGET_DIR)/debug/switchyard
MOCK_BIN    := $(TARGET_DIR)/debug/examples/mock_upstream
PYTEST_ARGS ?=

export CARGO_TERM_COLOR ?= auto

.PHONY: help build build-bins run check test test-rust test-python lint fmt clippy shellcheck bench soak fuzz clients clean

help:
	@sed -n '3,13s/^# \{0,1\}//p' Makefile

## Build -------------------------------------------------------------------

build:
	$(CARGO) build --workspace --all-targets
	$(CARGO) build --example mock_upstream

build-bins:
	$(CARGO) build --bin switchyard --example mock_upstream

## Run the demo ------------------------------------------------------------

run: build-bins
	CONFIG="$(CONFIG)" MOCK_LISTEN="$(MOCK_LISTEN)" SWITCHYARD_BIN="$(GATEWAY_BIN)" \
	  MOCK_UPSTREAM_BIN="$(MOCK_BIN)" bash scripts/run-demo.sh

check:
	$(CARGO) build --bin switchyard
	$(GATEWAY_BIN) check --config $(CONFIG)

## Tests -------------------------------------------------------------------

test: build test-rust test-python lint

test-rust:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
	  echo "+ cargo nextest run"; \
	  $(CARGO) nextest run --workspace --no-tests=warn; \
	  echo "+ cargo test --doc"; \
	  $(CARGO) test --workspace --doc; \
	else \
	  echo "+ cargo test"; \
	  $(CARGO) test --workspace; \
	fi

$(VENV)/.installed: tests/python/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt
	touch $@

# Runs the official openai/anthropic SDKs against a real gateway + mock upstream.
# Needs the debug binaries (make build); fails loudly when they are missing.
test-python: $(VENV)/.installed
	@for bin in $(GATEWAY_BIN) $(MOCK_BIN); do \
	  if [ ! -x "$$bin" ]; then \
	    echo "error: $$bin is missing; run 'make build' first" >&2; exit 1; \
	  fi; \
	done
	SWITCHYARD_BIN="$(abspath $(GATEWAY_BIN))" MOCK_UPSTREAM_BIN="$(abspath $(MOCK_BIN))" \
	  $(VENV)/bin/python -m pytest tests/python $(PYTEST_ARGS)

## Lint --------------------------------------------------------------------

lint: fmt clippy shellcheck

fmt:
	$(CARGO) fmt --all --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

shellcheck:
	@if command -v shellcheck >/dev/null 2>&1; then \
	  echo "+ shellcheck"; \
	  shellcheck .ci/run scripts/*.sh $$(ls benches/*.sh fuzz/*.sh 2>/dev/null); \
	else \
	  echo "shellcheck not installed; skipping"; \
	fi

## Benchmarks and fuzzing --------------------------------------------------

bench:
	PEERS="$(PEERS)" bash benches/run.sh

# Not part of `make test`: a bounded load against faulty mock channels; one summary line.
SOAK_DURATION    ?= 60s
SOAK_CONCURRENCY ?= 32
soak:
	$(CARGO) build --bin switchyard --example soak
	$(TARGET_DIR)/debug/examples/soak --gateway $(GATEWAY_BIN) \
	  --duration $(SOAK_DURATION) --concurrency $(SOAK_CONCURRENCY)

# Not part of `make test`: installs the real clients from npm and PyPI into .cache/clients and
# runs their scenarios against the mock through the gateway; one PASS/FAIL line each.
clients:
	bash scripts/clients.sh

fuzz:
	@if [ -f fuzz/run.sh ]; then \
	  bash fuzz/run.sh; \
	else \
	  echo "fuzz/run.sh not present; nothing to fuzz"; \
	fi

## Clean -------------------------------------------------------------------

clean:
	$(CARGO) clean
	rm -rf $(VENV) .pytest_cache tests/python/__pycache__
	rm -f switchyard-demo.db switchyard-demo.db-wal switchyard-demo.db-shm
