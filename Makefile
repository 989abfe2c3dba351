# qday: every command a person or CI runs. `make run` and `make test` are the
# two set-up commands of the README; both create .venv and install pinned deps.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
# The data directory and the ports; the QDAY_* variables of the environment apply (so
# `QDAY_PORT=8001 make run` and `make run PORT=8001` both work).
DATA_DIR ?= $(or $(QDAY_DATA_DIR),var)
PORT ?= $(or $(QDAY_PORT),8000)
DAGSTER_PORT ?= $(or $(QDAY_DAGSTER_PORT),3000)

.PHONY: install install-test run lint test bench lock clean screenshots

include mk/anvil.mk
include mk/softhsm.mk
include mk/postgres.mk
include mk/chromium.mk
include mk/pipelines.mk
include mk/fuzz.mk
include mk/client.mk
include mk/soak.mk

$(UV):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: $(UV) requirements.lock pyproject.toml client/pyproject.toml
	$(UV) pip install --quiet --python $(PY) --require-hashes -r requirements.lock
	$(UV) pip install --quiet --python $(PY) --no-deps -e . -e client
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.lock
	$(UV) pip install --quiet --python $(PY) --require-hashes -r requirements-test.lock
	touch $@

install: $(VENV)/.installed  ## create .venv and install the pinned dependencies

install-test: $(VENV)/.installed-test

run: install softhsm  ## start the API (127.0.0.1:PORT, 8000) and Dagster (127.0.0.1:DAGSTER_PORT, 3000) with data under DATA_DIR (var)
	$(VENV)/bin/qday up --data-dir $(DATA_DIR) --port $(PORT) --dagster-port $(DAGSTER_PORT)

screenshots: install-test anvil softhsm-test-token chromium  ## every dashboard page at 1280 and 390 px -> var/screenshots/ (a server and an anvil of their own)
	$(SOFTHSM_TEST_ENV) $(PY) -m tests.dashboard.screenshots --out $(DATA_DIR)/screenshots

lint: install-test  ## ruff (lint, import order, format check) and mypy, configured in pyproject.toml
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: install-test anvil softhsm-test-token postgres chromium lint  ## the linters, then the whole suite
	$(SOFTHSM_TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

BENCH_ARGS ?=

bench: install-test anvil softhsm-test-token postgres  ## every benchmark, medians of 3 runs -> bench/REPORT.md + bench/report.json (BENCH_ARGS="--runs 1 --only bench_api")
	$(SOFTHSM_TEST_ENV) $(PY) -m bench.report $(BENCH_ARGS)

lock: $(UV)  ## re-resolve pyproject.toml and refresh the hashed lock files
	$(UV) lock --quiet
	$(UV) export --quiet --no-emit-project --no-dev --format requirements-txt -o requirements.lock
	$(UV) export --quiet --no-emit-project --only-group test --format requirements-txt -o requirements-test.lock

clean:
	rm -rf $(VENV) .pytest_cache .softhsm-test
