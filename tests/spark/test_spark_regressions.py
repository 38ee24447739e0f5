"""Issue 14's compiler regressions (``tests/test_regressions_compiler.py``) on Spark + Iceberg.

Each scenario has its own tables, so each runs in its own harness (Iceberg namespace); the
scenarios run in parallel threads, each in its own session of the one Spark context (``USE``
is per session).
"""

from __future__ import annotations

import pytest

from duckstream.testing.spark_harness import expect_outcome, scenario_outcomes, selected_params
from test_regressions_compiler import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def outcomes(spark, request) -> dict[str, BaseException | None]:
    # Only the scenarios of the selected tests (``-k``) run.
    return scenario_outcomes(spark, SCENARIOS, selected_params(request, "name"))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_regression_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])
