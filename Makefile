# One toolchain: uv with the committed uv.lock, in .venv. A fresh machine needs only python3.
# `make demo` and `make test` are the README's two commands; CI runs `make test`.
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= $(BIN)/python
REPEAT ?= 3

.PHONY: install demo test test-all test-fast test-unit test-system test-contract lint typecheck bench bench-large bench-1m clean

$(BIN)/uv:
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv

# The dask extra too: tests/system/test_fanout.py runs the Dask executor on a local cluster.
# Bytecode is compiled at install time: where PYTHONDONTWRITEBYTECODE is set (CI and this
# machine set it), Python would otherwise compile Polars, DuckDB's and Dagster's modules from
# source in every process, about 0.5 s of CPU per CLI command and per build worker.
$(VENV)/.synced: $(BIN)/uv pyproject.toml uv.lock
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --frozen --group dev --extra dask --quiet --compile-bytecode
	touch $@

install: $(VENV)/.synced
	$(PYTHON) -m compileall -q -j 0 tracehouse pipelines bench

# Generate the demo dataset (data/demo), build ./warehouse from it, print a leaderboard.
demo: install
	$(BIN)/tracehouse demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/pyright

# The tests in tiers, as the data walks (docs/layout.md): tests/unit and tests/sql need no build
# and no server; tests/system runs the real command end to end (crash, interrupt, browser, S3,
# the Hub, Dagster); tests/contract holds the parity with KernelIndex and FlashInfer-Bench.
# Every tier; the 20 slowest tests are listed at the end, to see where the time goes. Two test
# processes (pytest-xdist), each given whole test files: a file's module fixtures (a built
# warehouse, a server) are made once, and a test waits on a build, a server or a browser much of
# its time, so two keep a 2-core machine busy (the suite: 47 minutes in one process in CI, 31 in
# two on a machine like it). PYTEST_PROCESSES=0 runs them one by one in pytest's own process.
PYTEST_PROCESSES ?= 2
PYTEST := $(BIN)/pytest -q -n $(PYTEST_PROCESSES) --dist loadfile
test-all: install
	$(PYTEST) --durations=20

test: lint typecheck test-all

# The quick tier to run while working: every test not marked `slow` (over 10 s) or
# `integration` (servers, a headless browser, Dagster end to end, big builds), in every folder.
test-fast: install
	$(PYTEST) -m "not slow and not integration" --durations=20

# One tier at a time, every test of it.
test-unit: install
	$(PYTEST) tests/unit tests/sql

test-system: install
	$(PYTEST) --durations=20 tests/system

test-contract: install
	$(PYTEST) --durations=20 tests/contract

# Benchmarks of issue 9 (bench/run.py). Each leg runs as its own process, side by side in one
# run, medians of $(REPEAT); datasets are generated once into data/bench/<lines> and reused;
# results go to bench/results/bench_<lines>.json and .md. Each run also reads the results of
# the other sizes there, so run `make bench` and then `make bench-large` and `make bench-1m`
# to get the scaling checks (4x and 1,000,000 lines against the 1x figure).
# ~154,000 trace lines (~485 MB), the 1x size of the issue's targets; then the scaling table of
# the fanned-out ingest (bench/fanout.py) by number of worker processes.
bench: install
	$(PYTHON) -m bench.run --lines 154000 --repeat $(REPEAT)
	$(PYTHON) -m bench.fanout --lines 154000 --workers 1,2,4
	$(PYTHON) -m bench.object_store --lines 154000 --repeat $(REPEAT)

# 4x the 1x size: peak memory against the 1x figure.
bench-large: install
	$(PYTHON) -m bench.run --lines 616000 --repeat $(REPEAT)

# 1,000,000 trace lines (~3.1 GB): the cold build time and peak, and a leaderboard query.
# Then issue 16's scale check: 1,000,000 lines over 200,000 distinct workloads, a cold build
# (peak of the process tree <= 1 GiB) and a report of it (< 60 s, < 1 GiB); exit 1 if missed.
bench-1m: install
	$(PYTHON) -m bench.run --lines 1000000 --repeat 1 --leaderboard-query
	$(PYTHON) -m bench.many_workloads --lines 1000000 --workloads 200000

clean:
	rm -rf warehouse data/demo .pytest_cache
