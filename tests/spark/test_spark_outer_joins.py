"""The outer-join scenarios of ``tests/test_outer_joins.py`` on Spark + Iceberg, run at once
by the ``outcomes`` fixture (``tests/spark/conftest.py``)."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import expect_outcome
from test_outer_joins import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_outer_join_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
