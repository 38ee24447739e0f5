"""Recursive CTEs on Spark + Iceberg: scenarios of ``tests/test_recursive.py`` from the same
view SQL. Spark 3.5 has no ``WITH RECURSIVE``: the plan iterates each recursion in steps of
its own (``engines/iceberg/recursion.py``), in the fill and in the refresh's delta. Run at
once by the ``outcomes`` fixture (``tests/spark/conftest.py``), checked after every refresh
against DuckDB's recomputation of the view over the tables' rows (Spark cannot recompute
it); and the depth bound's error."""

from __future__ import annotations

import pytest

from duckstream.engines.iceberg.runner import refresh
from duckstream.plan import IVMPlan
from duckstream.testing.differential import FROM_CATALOG, Insert, TableSpec, run_scenario
from duckstream.testing.spark_harness import (
    SparkHarness,
    chosen,
    expect_outcome,
    fewer_windows,
    spark_windows,
)
from test_recursive import EDGES, REACH, ROOTS, SCENARIOS  # tests/ is on sys.path

pytestmark = pytest.mark.spark

# A hierarchy under UNION ALL (appends, a subtree moved, deletes) and reachability with
# cycles under UNION (delete and rederive); DUCKSTREAM_SPARK_ALL=1 runs every scenario.
DEFAULT = ["hierarchy_paths", "reachability_with_cycles"]


@pytest.mark.parametrize("name", chosen(SCENARIOS, DEFAULT))
def test_recursive_on_spark(outcomes: dict[str, BaseException | None], name: str) -> None:
    expect_outcome(SCENARIOS[name], outcomes[name])


def test_a_cycle_under_union_all_fails_at_the_depth_bound_on_spark(spark) -> None:
    """A cycle never ends under UNION ALL: the refresh fails naming the setting, as on
    DuckDB, and the view keeps its rows (nothing is committed)."""
    harness = SparkHarness(spark.newSession())
    view_sql = REACH.format(kind="UNION ALL")
    harness.create(TableSpec("edges", EDGES, [(0, 1, 1), (1, 2, 1)]))
    harness.create(TableSpec("roots", ROOTS, [(0,)]))
    plan = harness.compile(view_sql, max_recursion_depth=3)
    harness.setup(plan)
    harness.check(plan, view_sql)
    harness.apply([Insert("edges", ((2, 0, 1),))])
    with pytest.raises(Exception, match="max_recursion_depth"):
        harness.refresh(plan)
    assert sorted(harness.rows(plan.query_mv)) == [(0,), (1,), (2,)]


class AutoHarness(SparkHarness):
    """Refreshes as users run them: ``strategy="auto"`` (on tables this small, a rebuild:
    the recursion iterated in the fill), then forced maintenance on the next."""

    strategies: list[str]

    def refresh(self, plan: IVMPlan) -> None:
        report = refresh(
            self.spark, plan, strategy="auto" if len(self.strategies) % 2 else "incremental"
        )
        self.strategies.append(report.strategy)


def test_compiled_with_schema_refreshed_auto_on_spark(spark) -> None:
    """``schema=`` (as dbt compiles) and ``auto`` alternating with forced maintenance."""
    scenario = SCENARIOS["reachability_with_cycles"]
    harness = AutoHarness(spark.newSession())
    harness.strategies = []
    cycles = fewer_windows(scenario.cycles, spark_windows())
    run_scenario(harness, scenario.tables, scenario.view, cycles, schema=FROM_CATALOG)
    assert harness.strategies[0] == "incremental", harness.strategies
