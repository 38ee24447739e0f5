"""A recursive CTE scenario of ``tests/test_recursive.py`` on Spark + Iceberg: Spark 3.5 has
no ``WITH RECURSIVE``, so duckstream refuses it by name (``recursive_cte``) from the same SQL
DuckLake maintains."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_recursive import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", chosen(SCENARIOS, ["hierarchy_paths"]))
def test_recursive_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
