"""The outer-join scenarios of ``tests/test_outer_joins.py`` on Spark + Iceberg.

Each scenario has its own tables, so each runs in its own harness (Iceberg namespace); the
scenarios run in parallel threads, each in its own session of the one Spark context (``USE``
is per session).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from duckstream.testing.differential import run_scenario
from duckstream.testing.spark_harness import SparkHarness
from test_outer_joins import SCENARIOS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

THREADS = 3


@pytest.fixture(scope="module")
def outcomes(spark, request) -> dict[str, BaseException | None]:
    # Only the scenarios of the selected tests (``-k``) run.
    selected = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.nodeid.startswith(request.node.nodeid) and hasattr(item, "callspec")
    ]
    harnesses = {name: SparkHarness(spark.newSession()) for name in selected}

    def run(name: str) -> BaseException | None:
        scenario, harness = SCENARIOS[name], harnesses[name]
        try:
            run_scenario(
                harness, scenario.tables, scenario.view, scenario.cycles, **scenario.compile_kwargs
            )
        except BaseException as error:  # noqa: BLE001 - reported by the scenario's own test
            return error
        return None

    # A refusal is a compile error, reported as the scenario's outcome like any other.
    with ThreadPoolExecutor(THREADS) as pool:
        return dict(zip(selected, pool.map(run, selected), strict=True))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_outer_join_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    error = outcomes[name]
    if error is not None:
        raise error
