# Quick start on a fresh machine: `make demo`, then `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test

.PHONY: demo test check lint typecheck pytest bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The test extras include torch==2.13.0 (a CPU build that pip takes from the local disk).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# The demo installs only what it needs (the `demo` extra: torch==2.13.0 beside the core's numpy and rich),
# not the test extra's frameworks: its own stamp, so `make demo` on a fresh clone stays well under a minute.
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[demo]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/trainprobe demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

check: test

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python benchmarks/scan.py
	$(BIN)/python benchmarks/remote.py
	$(BIN)/python benchmarks/remote_fanout.py
	$(BIN)/python benchmarks/save.py
	$(BIN)/python benchmarks/logs.py
	$(BIN)/python benchmarks/logs_quality.py
	$(BIN)/python benchmarks/checkpoint_quality.py
	$(BIN)/python benchmarks/checkpoint_damage.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
