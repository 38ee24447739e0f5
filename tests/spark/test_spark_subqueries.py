"""The subquery scenarios of ``tests/test_subqueries.py`` on Spark + Iceberg, from the same
view SQL (transpiled), run at once by the ``outcomes`` fixture (``tests/spark/conftest.py``):
rows after every refresh compared with recomputation.

By default a representative few (``chosen``): a correlated EXISTS, NOT IN's NULL semantics, a
correlated scalar AVG, an integer sum times a DECIMAL literal over a sum and a refused
quantified comparison; their rules are proven on DuckLake. A tuple IN (a join on two keys) and
quoted mixed-case names (rendered on Spark by ``test_spark_star``'s and
``test_spark_regressions``' scenarios) run with the rest.
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
    "not_in_correlated",
    "scalar_correlated_avg",
    "share_of_total",
]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_subquery_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
