"""Table functions over a row's columns and LATERAL subqueries on Spark + Iceberg: scenarios
of ``tests/test_lateral.py`` from the same view SQL (``unnest`` rendered as ``LATERAL
EXPLODE``, a series as ``EXPLODE(SEQUENCE(...))`` guarded against a step away from the end),
run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``): rows after every
refresh, column names and Spark's column types compared with the view's."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_lateral import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark
CHECK_TYPES = True

# LEFT JOIN LATERAL unnest aggregated per row, a series over columns, and a LEFT JOIN LATERAL
# subquery of aggregates; DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = ["unnest_left_aggregated_per_row", "range_over_columns", "lateral_left_aggregate"]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_lateral_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
