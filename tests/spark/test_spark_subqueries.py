"""The subquery scenarios of ``tests/test_subqueries.py`` on Spark + Iceberg, from the same
view SQL (transpiled), run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``):
rows after every refresh compared with recomputation.

CI runs one scenario of each kind (a Spark refresh costs seconds, and all the scenarios of ten
windows take over an hour on two cores; a subquery correlated by ``<>`` or ``<`` reads the
outer table twice and costs several times the others); ``DUCKSTREAM_SPARK_ALL=1`` runs every
one."""

from __future__ import annotations

import os

import pytest

from duckstream.testing.spark_harness import expect_outcome
from test_subqueries import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

ONE_OF_EACH_KIND = [
    "exists",
    "not_exists",
    "not_exists_not_equal",
    "exists_by_inequality_with_a_second_outer_table",
    "exists_under_or",
    "exists_uncorrelated",
    "in_correlated",
    "in_tuple",
    "not_in_uncorrelated",
    "not_in_correlated",
    "in_under_not",
    "in_in_select",
    "greater_than_all",
    "exists_in_select",
    "share_of_total",
    "scalar_avg",
    "scalar_correlated_avg",
    "scalar_correlated_count_is_zero",
    "scalar_in_having",
    "nested_subqueries",
    "quoted_mixed_case",
]
NAMES = sorted(SCENARIOS) if os.environ.get("DUCKSTREAM_SPARK_ALL") else ONE_OF_EACH_KIND


@pytest.mark.parametrize("name", NAMES)
def test_subquery_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
