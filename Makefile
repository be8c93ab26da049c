# The two commands of the README: `make demo` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench schemas clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/seqjudge demo golden_traces

# SEQJUDGE_REQUIRE_POSTGRES: here the store's PostgreSQL tests must run (a server that cannot start fails them).
test: $(VENV)/.installed-test
	@bash scripts/ensure-chromium.sh
	@bash scripts/ensure-postgres.sh
	SEQJUDGE_REQUIRE_POSTGRES=1 $(BIN)/python -m pytest

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/engine.py

# The editors' JSON Schemas, generated from the models (tests/test_schema.py fails when they drift).
schemas: $(VENV)/.installed
	$(BIN)/seqjudge schema rules -o schemas/rules.schema.json
	$(BIN)/seqjudge schema config -o schemas/seqjudge.schema.json

clean:
	rm -rf $(VENV) .seqjudge .pytest_cache
