"""The views of ``tests/test_smoke.py`` through its change cycles, on Spark + Iceberg: by
default a few (aggregates and their NULLs, DISTINCT, FILTER, expressions, a refusal) over
``spark_windows()`` windows; every view through every window with DUCKSTREAM_SPARK_ALL=1.

All views share one ``orders`` table: each cycle's changes are committed once, then every
view is refreshed and compared with recomputation. Views refresh in parallel threads (one
Spark session; each view has its own temp views and cursor partition), which hides much of
Spark's per-statement latency.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from duckstream.errors import UnsupportedSQLError
from duckstream.plan import IVMPlan
from duckstream.testing.spark_harness import (
    SparkHarness,
    chosen,
    fewer_windows,
    selected_params,
    spark_windows,
)
from test_smoke import CYCLES, ORDERS, VIEWS  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

# Views Spark refuses on purpose, with the feature named in the error.
REFUSED = {"aggregate_expression": "spark_unsupported"}
THREADS = 3
# The CTE, DISTINCT and the plain global aggregate re-prove DuckLake's rules (DISTINCT on Spark:
# test_spark_regressions; a global aggregate: having_on_global): DUCKSTREAM_SPARK_ALL runs them.
DEFAULT = [
    "aggregate_expression",
    "count_distinct",
    "expressions",
    "filtered_aggregate",
    "group_by",
    "having_on_global",
]


@dataclass
class Outcome:
    plans: dict[str, IVMPlan] = field(default_factory=dict)
    refused: dict[str, UnsupportedSQLError] = field(default_factory=dict)
    failed: dict[str, BaseException] = field(default_factory=dict)


def _each(pool: ThreadPoolExecutor, outcome: Outcome, step: Callable[[str, IVMPlan], None]):
    """Run ``step`` for every view that has not failed yet, recording the first failure."""

    def guarded(name: str, plan: IVMPlan) -> None:
        try:
            step(name, plan)
        except BaseException as error:  # noqa: BLE001 - reported by the view's own test
            outcome.failed[name] = error

    live = [(n, p) for n, p in outcome.plans.items() if n not in outcome.failed]
    list(pool.map(lambda item: guarded(*item), live))


@pytest.fixture(scope="module")
def outcome(spark, request: pytest.FixtureRequest) -> Outcome:
    harness = SparkHarness(spark)
    harness.create(ORDERS)
    result = Outcome()
    for name in selected_params(request, "name"):
        try:
            result.plans[name] = harness.compile(VIEWS[name], mv_name=f"mv_{name}")
        except UnsupportedSQLError as error:
            result.refused[name] = error
    for plan in list(result.plans.values())[:1]:  # none when only refusals are selected
        spark.sql(plan.create_cursors_table)

    def setup(name: str, plan: IVMPlan) -> None:
        harness.setup(plan)
        harness.check(plan, VIEWS[name], "after setup")

    with ThreadPoolExecutor(THREADS) as pool:
        _each(pool, result, setup)
        for n, cycle in enumerate(fewer_windows(CYCLES, spark_windows()), 1):
            for batch in cycle:
                harness.apply(batch)

            def refresh(name: str, plan: IVMPlan, n: int = n) -> None:
                harness.refresh(plan)
                harness.check(plan, VIEWS[name], f"after refresh {n}")

            _each(pool, result, refresh)
    return result


@pytest.mark.parametrize("name", chosen(VIEWS, DEFAULT))
def test_view_matches_recomputation_on_spark(outcome: Outcome, name: str) -> None:
    if name in REFUSED:
        assert outcome.refused[name].feature == REFUSED[name]
        return
    assert name not in outcome.refused, outcome.refused.get(name)
    if name in outcome.failed:
        raise outcome.failed[name]
