"""Time as a source on Spark + Iceberg: the same views as ``tests/test_time.py`` (where the
delta rules run deep), from the same SQL. The clock is the Spark setting
``spark.duckstream.now`` (an ISO timestamp), recorded with the cursors as the snapshot
property ``duckstream.clock``; the oracle is the view with each time function a literal of
the clock."""

from __future__ import annotations

import datetime

import pytest

from duckstream.engines.iceberg.status import views_status
from duckstream.errors import RebuildRequired
from duckstream.spark import refresh
from duckstream.testing.differential import Column, Delete, Insert, TableSpec, check_result
from duckstream.testing.spark_harness import SparkHarness, to_spark
from test_time import CLOCK_ONLY  # tests/ is on sys.path (its conftest)

pytestmark = pytest.mark.spark

START = datetime.datetime(2026, 1, 10, 12, 0, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
EVENTS = TableSpec(
    "events",
    [Column("k", "INTEGER"), Column("d", "DATE"), Column("v", "INTEGER")],
    [(i, datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 20), i % 3) for i in range(30)],
)


def _at(template: str, clock: datetime.datetime) -> str:
    return template.format(today=f"CAST(TIMESTAMP '{clock:%Y-%m-%d %H:%M:%S}+00:00' AS DATE)")


def _set_clock(harness: SparkHarness, clock: datetime.datetime) -> None:
    harness.spark.conf.set("spark.duckstream.now", clock.isoformat())


def _check(harness: SparkHarness, plan, template: str, clock, context: str) -> None:
    actual = harness.result(plan.query_mv)
    expected = harness.result(to_spark(_at(template, clock)))
    check_result(template, f"{context} at {clock}", expected, actual, False)


@pytest.fixture
def harness(spark):
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    harness = SparkHarness(spark)
    harness.create(EVENTS)
    yield harness
    spark.conf.unset("spark.duckstream.now")


def test_a_temporal_filter_under_an_aggregate_is_maintained_as_the_clock_moves(harness):
    template = (
        "SELECT v, count(*) AS n FROM events"
        " WHERE d >= {today} - INTERVAL 7 DAY AND d <= {today} GROUP BY v"
    )
    plan = harness.compile(template.format(today="current_date"))
    assert "temporal_filter" in plan.features
    clock = START
    _set_clock(harness, clock)
    harness.setup(plan)
    _check(harness, plan, template, clock, "after setup")
    for n, step in enumerate([2 * DAY, 0 * DAY, -3 * DAY], 1):
        clock += step
        if n != 2:
            harness.apply([Insert("events", ((100 + n, clock.date(), n),))])
        if n == 3:
            harness.apply([Delete("events", "k % 7 = 1")])
        _set_clock(harness, clock)
        report = refresh(harness.spark, plan, strategy="incremental")
        assert report.strategy == "incremental"
        _check(harness, plan, template, clock, f"after refresh {n}")


def test_the_clock_in_the_select_list_rebuilds_when_it_moved(harness):
    template = "SELECT k, d > {today} - INTERVAL 3 DAY AS recent FROM events WHERE v = 1"
    plan = harness.compile(template.format(today="current_date"))
    _set_clock(harness, START)
    harness.setup(plan)
    harness.apply([Insert("events", ((200, START.date(), 1),))])
    _set_clock(harness, START + datetime.timedelta(hours=3))  # the same day
    assert refresh(harness.spark, plan, strategy="incremental").strategy == "incremental"
    _check(harness, plan, template, START, "the day did not move")
    _set_clock(harness, START + DAY)
    with pytest.raises(RebuildRequired, match="moved from 2026-01-10 to 2026-01-11"):
        refresh(harness.spark, plan, strategy="incremental")
    report = refresh(harness.spark, plan, strategy="auto")
    assert report.strategy == "full"
    assert report.reason == "the view reads current_date, which moved from 2026-01-10 to 2026-01-11"
    _check(harness, plan, template, START + DAY, "after the rebuild")


def test_a_view_whose_only_source_is_the_clock_pins_the_clock_alone(harness):
    """dbt_utils' date_spine by month up to current_date (``tests/test_time.py``'s
    util_months, as dbt-duckdb renders it), alone: no table, its refresh pins the clock and
    records it as the view's snapshot property."""
    template = CLOCK_ONLY["util_months"]
    plan = harness.compile(template.format(today="current_date"))
    assert plan.sources == [] and "temporal_filter" in plan.features
    _set_clock(harness, START)
    harness.setup(plan)
    _check(harness, plan, template, START, "after setup")
    for n, clock in enumerate([START + 3 * DAY, START + 25 * DAY, START - 45 * DAY], 1):
        _set_clock(harness, clock)
        report = refresh(harness.spark, plan, strategy="auto")
        assert report.strategy == "incremental", report
        _check(harness, plan, template, clock, f"after refresh {n}")
    # status lists it: no cursor, never behind a source, its refreshes from its snapshots
    catalog, namespace, _ = plan.mv_table.split(".")
    (status,) = [
        s for s in views_status(harness.spark, catalog, namespace) if s.view == plan.mv_table
    ]
    assert status.cursors == {} and status.pending == 0 and len(status.refreshes) >= 2
