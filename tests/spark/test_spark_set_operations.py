"""The set-operation scenarios of ``tests/test_set_operations.py`` on Spark + Iceberg, from
the same view SQL (transpiled: Spark spells EXCEPT as Spark does), run at once by the
``outcomes`` fixture (``tests/spark/conftest.py``): rows after every refresh, column names and
Spark's column types compared with the view's."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_set_operations import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark
CHECK_TYPES = True


# One of each kind by default (EXCEPT ALL's rendering, types met across branches, names from
# the first branch); DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "decimal_meets_double",
    "except_all",
    "names_from_first_branch",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_set_operation_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
