"""``refresh(..., conflict_retries=n)``: a refresh that lost the race to another refresh of the
same view starts over, logged, at most ``n`` times; then the conflict is raised. The race
itself is staged here (the engine's refresh raises it before touching anything, as a lost
refresh leaves the view); real races: tests/test_postgres_catalog.py (DuckLake) and
tests/spark/test_spark_concurrent.py (Iceberg)."""

from __future__ import annotations

import logging

import pytest

from duckstream import runtime
from duckstream.engines.ducklake import runner
from duckstream.errors import RefreshConflict
from duckstream.testing.differential import Column, DuckLakeHarness, Insert, TableSpec

VIEW = "SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k"


@pytest.mark.parametrize("lost", [0, 1, 2])
def test_a_refresh_that_lost_the_race_starts_over(lake, monkeypatch, caplog, lost) -> None:
    harness = DuckLakeHarness(lake)
    harness.create(TableSpec("t", [Column("k", "INTEGER"), Column("v", "INTEGER")], [(1, 1)]))
    plan = harness.compile(VIEW, schema={"t": {"k": "INTEGER", "v": "INTEGER"}})
    harness.setup(plan)
    harness.apply([Insert("t", ((1, 2), (2, 3)))])
    calls = []
    engine_refresh = runner.refresh

    def losing(*args, **kwargs):
        calls.append(args)
        if len(calls) <= lost:
            raise RefreshConflict(plan.mv_table, "staged", "DuckLake")
        return engine_refresh(*args, **kwargs)

    monkeypatch.setattr(runner, "refresh", losing)
    if lost > 1:  # more losses than retries: the conflict is the caller's
        with pytest.raises(RefreshConflict, match=plan.mv_table):
            runtime.refresh(lake, plan, "incremental", conflict_retries=1)
        assert len(calls) == 2
        return
    with caplog.at_level(logging.WARNING, logger="duckstream"):
        report = runtime.refresh(lake, plan, "incremental", conflict_retries=1)
    assert report.strategy == "incremental" and len(calls) == lost + 1
    assert sum("starting over" in r.getMessage() for r in caplog.records) == lost
    harness.check(plan, VIEW, f"after {lost} lost races")
