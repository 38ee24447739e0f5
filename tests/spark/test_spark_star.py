"""The ``SELECT *`` scenarios of ``tests/test_star.py`` on Spark + Iceberg, from the same view
SQL, the tables' columns read from the Iceberg catalog with ``schema_of``; run at once by the
``outcomes`` fixture (``tests/spark/conftest.py``), column names compared with the view's."""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_star import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


# One of each kind by default; DUCKSTREAM_SPARK_ALL=1 runs every scenario (``chosen``).
DEFAULT = [
    "qualified_star_in_join",
    "star_over_quoted_names_in_cte",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_star_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
