# duckstream: `make demo` and `make test` are all the set-up a fresh clone needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test test-spark test-spark-all test-deep test-postgres lint demo bench bench-spark clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: venv
	$(BIN)/ruff check python tests bench integration_tests dbt_duckstream
	$(BIN)/ruff format --check python tests bench integration_tests dbt_duckstream
	$(BIN)/ty check python dbt_duckstream

# `make test` proves each engine-independent rule once, fast: the operator tests check every
# delta rule in memory, the DuckLake property tests run a dozen examples a construct (six for
# each widened-grammar construct), the dbt pipeline two change cycles. Spark runs a
# portability subset (a scenario of each kind that exercises Spark's rendering, types or
# change feeds, over at most three windows). test-spark-all is the full Spark matrix (every scenario, every window, the
# standalone cluster and the other-process writer), to run before calling Spark work done;
# test-deep digs deeper on DuckLake (hundreds of examples a property, not derandomized, the
# broken-delta-rule checks, a third dbt change cycle).
# Two pytest-xdist workers, a test file each at a time: a file's tests share its module-scoped
# state (a dbt project, TPC-H lakes) in one worker; each worker that reaches a tests/spark
# file starts its own local Spark (all of them in one worker's JVM left it dead by the run's
# end).
test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

test-spark: venv
	$(BIN)/python -m pytest -q tests/spark

test-spark-all: venv
	DUCKSTREAM_SPARK_ALL=1 $(BIN)/python -m pytest -q tests/spark

test-deep: venv
	DUCKSTREAM_DEEP=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not spark"

# The DuckLake property tests with every lake's catalog in PostgreSQL (a server the session
# starts from the pgserver package); `make test` runs a representative subset of them.
test-postgres: venv
	DUCKSTREAM_CATALOG=postgres $(BIN)/python -m pytest -q -n 2 --dist loadfile \
		tests/test_properties.py tests/test_postgres_catalog.py

demo: venv
	$(BIN)/python -m duckstream.demo_dbt

bench: venv
	$(BIN)/python -m bench

bench-spark: venv
	$(BIN)/python -m bench.spark

clean:
	rm -rf $(VENV) demo integration_tests/lake .pytest_cache .ruff_cache .hypothesis
