"""The ROLLUP / CUBE / GROUPING SETS scenarios of ``tests/test_grouping_sets.py`` on Spark +
Iceberg, from the same view SQL (transpiled), run at once by the ``outcomes`` fixture
(``tests/spark/conftest.py``): rows after every refresh compared with recomputation. Spark's
grand totals give no row over an empty table (SQL's give one): the scenarios empty it."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_grouping_sets import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default; DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "cube_with_grouping_id",
    "rollup",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_grouping_sets_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
