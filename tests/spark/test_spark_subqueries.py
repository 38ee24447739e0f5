"""The subquery scenarios of ``tests/test_subqueries.py`` on Spark + Iceberg, from the same
view SQL (transpiled), run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``):
rows after every refresh compared with recomputation.

By default a representative few (``chosen``): a correlated EXISTS, NOT IN's NULL semantics, a
correlated scalar AVG, an integer sum times a DECIMAL literal over a sum, a tuple IN, a
refused quantified comparison and quoted mixed-case names; their rules are proven on DuckLake.
``DUCKSTREAM_SPARK_ALL=1`` runs every one (a subquery correlated by ``<>`` or ``<`` reads the
outer table twice and costs several times the others).
"""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import chosen, expect_outcome
from test_subqueries import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

DEFAULT = [
    "exists",
    "greater_than_all",
    "in_tuple",
    "not_in_correlated",
    "quoted_mixed_case",
    "scalar_correlated_avg",
    "share_of_total",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_subquery_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
