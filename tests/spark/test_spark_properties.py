"""The differential properties of ``tests/test_properties.py`` on Spark + Iceberg.

Same scenarios (random schemas, views, change windows with several batches and tables, the
widened grammar of ``strategies.CONSTRUCTS``), restricted to what both engines support
(``portable``: no string_agg, typed NULL literals only), fewer examples: a Spark refresh
costs seconds, not milliseconds. Column names are compared too.

CI depth by default: 2 examples per test, 1 per widened-grammar construct, each over at most
``spark_windows()`` windows; DUCKSTREAM_SPARK_ALL=1 runs 5 per test and 2 per construct over
all their windows; DUCKSTREAM_SPARK_EXAMPLES=<n> sets every count.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, reject, settings

from duckstream.errors import UnsupportedSQLError
from duckstream.testing.differential import FROM_CATALOG, run_scenario
from duckstream.testing.spark_harness import (
    SparkHarness,
    fewer_windows,
    spark_all,
    spark_windows,
)
from strategies import CONSTRUCTS, rework_rows  # tests/ is on sys.path (its conftest)
from test_properties import scenarios  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

_ALL = spark_all()
EXAMPLES = int(os.environ.get("DUCKSTREAM_SPARK_EXAMPLES") or (5 if _ALL else 2))
WIDE_EXAMPLES = int(os.environ.get("DUCKSTREAM_SPARK_EXAMPLES") or (2 if _ALL else 1))


def _run(spark, scenario) -> None:
    # compiled without schema= (types first known at setup); one Iceberg catalog (no
    # placement); DuckLake's inlining does not apply
    _check(spark, scenario, known_schema=False)


def _check(spark, scenario, known_schema: bool) -> None:
    """``_run``, compiled with ``schema=`` when ``known_schema`` and the scenario drew it."""
    tables_, view_sql, cycles_, drawn_schema, *_ = scenario
    cycles_ = fewer_windows(cycles_, spark_windows())
    kwargs = {"schema": FROM_CATALOG} if known_schema and drawn_schema else {}
    try:
        harness = SparkHarness(spark, check_names=True)
        run_scenario(harness, tables_, view_sql, cycles_, **kwargs)
    except UnsupportedSQLError as error:
        if error.feature != "spark_unsupported":
            raise
        reject()  # refused on Spark on purpose (tests/spark/test_spark_rebuild.py)


@settings(max_examples=EXAMPLES)
@given(scenario=scenarios(1, portable=True))
def test_single_table_views_on_spark(spark, scenario):
    _run(spark, scenario)


@settings(max_examples=EXAMPLES)
@given(scenario=scenarios(2, portable=True))
def test_two_table_joins_with_simultaneous_changes_on_spark(spark, scenario):
    _run(spark, scenario)


@settings(max_examples=EXAMPLES)
@given(scenario=scenarios(2, outer=True, portable=True))
def test_two_table_outer_joins_on_spark(spark, scenario):
    _run(spark, scenario)


@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_widened_grammar_on_spark(spark, construct):
    scenario = scenarios(2, construct=construct, portable=True)
    settings(max_examples=WIDE_EXAMPLES)(given(scenario=scenario)(_run))(spark)


@settings(max_examples=WIDE_EXAMPLES)
@given(scenario=scenarios(2, transactions=True, portable=True))
def test_insert_then_modify_on_spark(spark, scenario):
    _run(spark, scenario)


@settings(max_examples=EXAMPLES)
@given(scenario=scenarios(1, transactions=True, portable=True, several=(rework_rows,)))
def test_rows_changed_several_times_on_spark(spark, scenario):
    """Issue 30's change streams (``strategies.rework_rows``: rows updated twice, updated
    then deleted, deleted and inserted again, each row of a file changed apart), compiled
    with and without ``schema=``. Spark commits each statement on its own: Iceberg's
    changelog sees every intermediate version of a row, which must net out."""
    _check(spark, scenario, known_schema=True)
