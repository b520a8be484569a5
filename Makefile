# Two entry points: `make demo` runs the main job on the embedded defaults; `make test` runs everything.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CONTRIB := $(sort $(wildcard contrib_tools/*/))

.PHONY: demo test lint typecheck unit docs bench clean

$(STAMP): pyproject.toml Makefile $(wildcard contrib_tools/*/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' $(CONTRIB:%=-e %)
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" sh examples/run-demo.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

test: lint typecheck docs unit

bench: $(STAMP)
	$(PY) bench/percall.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
