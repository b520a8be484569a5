# Two entry points: `make demo` runs the main job on the embedded defaults; `make test` runs everything.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CONTRIB := $(sort $(wildcard contrib_tools/*/))

.PHONY: demo test lint typecheck unit docs bench fuzz clean sysdeps

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

# System programs the suite runs for real (redis-server); installed with apt-get when missing and root.
sysdeps:
	@command -v redis-server >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && DEBIAN_FRONTEND=noninteractive apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } \
	  || echo "redis-server is not installed: the Redis tests will skip"

unit: $(STAMP) sysdeps
	$(PY) -m pytest

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

test: lint typecheck docs unit

# The benchmark's peers, installed once from bench/requirements.txt.
$(VENV)/.bench-installed: $(STAMP) bench/requirements.txt
	$(PY) -m pip install --quiet -r bench/requirements.txt
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) bench/percall.py $(BENCH_ARGS)

# A long fuzz run of the registry and the agent loop (the suite runs the same properties briefly);
# prints the figures. 20,000 examples take about 7 minutes on 2 cores.
FUZZ_EXAMPLES ?= 20000
fuzz: $(STAMP)
	HARNESS_ONE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -s -p no:cacheprovider tests/test_fuzz.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
