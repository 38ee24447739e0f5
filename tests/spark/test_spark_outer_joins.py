"""The outer-join scenarios of ``tests/test_outer_joins.py`` on Spark + Iceberg, run at once
by the ``outcomes`` fixture (``tests/spark/conftest.py``)."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_outer_joins import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default (FULL JOIN, LEFT JOIN's NULL keys); DUCKSTREAM_SPARK_ALL=1 runs
# every scenario (``chosen``).
DEFAULT = [
    "full_join",
    "left_null_keys",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_outer_join_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
