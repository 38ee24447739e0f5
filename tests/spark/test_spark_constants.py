"""Constant relations on Spark + Iceberg: scenarios of ``tests/test_constants.py`` from the
same view SQL (a series rendered as Spark's ``range``, VALUES and SELECTs without FROM as
Spark writes them), run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``):
rows after every refresh, column names and Spark's column types compared with the view's."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_constants import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark
CHECK_TYPES = True

# A spine joined and grouped, a VALUES CTE joined, constants unioned with a table;
# DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = ["spine_left_join_aggregate", "union_with_constants", "values_cte_joined"]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_constant_relation_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
