# Benchmarks of issue 5 (bench/run.py). Each leg runs as its own process; datasets are
# generated once into data/bench/<lines> and reused; results go to bench/results/.
PYTHON ?= python
REPEAT ?= 3

.PHONY: bench bench-large bench-1m

# ~154,000 trace lines (~485 MB), the size of the issue's acceptance criteria.
bench:
	$(PYTHON) -m bench.run --lines 154000 --repeat $(REPEAT)

# 4x the default size, to see how time and peak memory scale.
bench-large:
	$(PYTHON) -m bench.run --lines 616000 --repeat $(REPEAT)

# 1,000,000 trace lines (~3.1 GB) plus the timing of a leaderboard query on the result.
bench-1m:
	$(PYTHON) -m bench.run --lines 1000000 --repeat 1 --leaderboard-query
