"""Time as a source: views that read ``current_date``, ``now()``... (issue 36, item 2).

The refresh reads the clock once (the session variable ``duckstream_now`` here: the tests
set it) and records it with the cursors. Temporal filters (a WHERE conjunct comparing the
rows with a monotone expression of the clock) are maintained as the clock moves; any other
use of the clock rebuilds when its value moved, and says why. The oracle is the view's
SQL with each time function written as a literal of the clock (a template's ``{today}``,
``{now}``), evaluated by DuckDB: it shares nothing with the compiler's rewrite.

Depth: ``DUCKSTREAM_EXAMPLES=<n>`` examples for the property on DuckLake (default 10, 300
under ``DUCKSTREAM_DEEP=1``) and four times that for the delta rule checked in memory
(default 100, 1200 deep).
"""

from __future__ import annotations

import datetime
from collections import Counter

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp, parse_one

from duckstream.compiler import compile_ivm
from duckstream.engines.base import Source, Target, Version
from duckstream.engines.ducklake.engine import DuckLakeEngine
from duckstream.engines.ducklake.status import views_status
from duckstream.errors import RebuildRequired, UnsupportedSQLError
from duckstream.explain import explain
from duckstream.normalize import normalize
from duckstream.normalize.pin_clock import is_temporal_filter, pin_clock
from duckstream.runtime import refresh, setup
from duckstream.status import status_text
from duckstream.strategy import Policy
from duckstream.testing.differential import (
    Column,
    Delete,
    DuckLakeHarness,
    Insert,
    TableSpec,
    Update,
    check_result,
    tables_schema,
)
from duckstream.testing.ducklake import connect_ducklake
from duckstream.tree.base import Context
from duckstream.tree.build import build_relation
from strategies import examples  # tests/ is on sys.path (its conftest)

START = datetime.datetime(2026, 1, 10, 12, 0, tzinfo=datetime.UTC)

EVENTS = TableSpec(
    "events",
    [
        Column("k", "INTEGER"),
        Column("d", "DATE"),
        Column("ts", "TIMESTAMP"),
        Column("v", "INTEGER"),
    ],
)
USERS = TableSpec("users", [Column("k", "INTEGER"), Column("name", "VARCHAR")])

# view templates: {today} is current_date, {now} is now(), {local} localtimestamp
TEMPORAL = {
    "last_7_days": "SELECT k, d, v FROM events WHERE d >= {today} - 7 AND d <= {today}",
    "last_week_ts": "SELECT k, ts FROM events WHERE ts > {now} - INTERVAL 7 DAY AND v > 0",
    "between": "SELECT k, v FROM events WHERE d BETWEEN {today} - 3 AND {today} + 2",
    "future": "SELECT k FROM events WHERE {today} < d",
    "equal_today": "SELECT k, v FROM events WHERE d = {today}",
    "local": "SELECT k FROM events WHERE ts <= {local} - INTERVAL 2 DAY",
    "grouped": "SELECT k % 3 AS g, count(*) AS n, sum(v) AS s FROM events"
    " WHERE d > {today} - INTERVAL 5 DAY GROUP BY k % 3",
    "joined": "SELECT e.k, u.name, e.d FROM events AS e JOIN users AS u ON e.k = u.k"
    " WHERE e.d >= {today} - 4",
    "in_on": "SELECT e.k, u.name FROM users AS u LEFT JOIN events AS e ON e.k = u.k"
    " JOIN users AS w ON w.k = u.k AND e.ts >= {now} - INTERVAL 3 DAY",
    "derived": "SELECT x.k, count(*) AS n FROM (SELECT k, v FROM events"
    " WHERE d > {today} - 10) AS x GROUP BY x.k",
    "truncated": "SELECT k FROM events WHERE d >= date_trunc('month', {today})",
    "distinct": "SELECT DISTINCT v FROM events WHERE d < {today}",
    "exists": "SELECT u.k, u.name FROM users AS u WHERE EXISTS (SELECT 1 FROM events AS e"
    " WHERE e.k = u.k AND e.d >= {today} - 3)",
    "window": "SELECT k, d, rank() OVER (PARTITION BY v ORDER BY d, k) AS r FROM events"
    " WHERE d > {today} - 6",
    # a spine of constants filtered up to today, joined to facts: the spine's days that
    # cross today are changes of the join (its first counterexample: the join left out the
    # delta of a leaf that reads no table, and kept the old days)
    "spine_joined": "SELECT s.day, count(e.k) AS n FROM (SELECT CAST(r.d AS DATE) AS day"
    " FROM range(DATE '2026-01-01', DATE '2026-03-01', INTERVAL 1 DAY) AS r(d)"
    " WHERE r.d <= {today}) AS s LEFT JOIN events AS e ON e.d = s.day GROUP BY s.day",
}
# the clock outside a temporal filter: a rebuild when its value moved
REBUILT = {
    "age": "SELECT k, {today} - d AS age FROM events WHERE v > 0",
    "or": "SELECT k FROM events WHERE d > {today} OR v = 1",
    "aggregate": "SELECT max(d) = {today} AS latest_is_today FROM events",
    "in_on_before_full": "SELECT e.k, u.name FROM events AS e JOIN users AS u"
    " ON e.k = u.k AND e.d < {today} FULL JOIN users AS w ON w.k = e.k + 1",
    # a branch without FROM that reads the clock
    "constant_branch": "SELECT k, d FROM events UNION ALL SELECT 0 AS k, {today} AS d",
    # a date spine up to today (a constant relation that reads the clock) joined to facts
    "spine": "SELECT CAST(g.day AS DATE) AS day, count(e.k) AS n FROM generate_series("
    "CAST({today} AS TIMESTAMP) - INTERVAL 20 DAY, CAST({today} AS TIMESTAMP), INTERVAL 1 DAY)"
    " AS g(day) LEFT JOIN events AS e ON e.d = CAST(g.day AS DATE) GROUP BY g.day",
}


def _date_spine(datepart: str, start: str, intervals: int, end: str) -> str:
    """dbt_utils' ``date_spine(datepart, start, end)`` as dbt-duckdb renders it
    (integration_tests/packages/dbt_utils: ``generate_series`` of the intervals counted
    when the model compiles, the dates added to ``start``, filtered up to ``end``)."""
    bits = max(1, (intervals - 1).bit_length())
    terms = " + ".join(f"p{i}.generated_number * power(2, {i})" for i in range(bits))
    joins = " cross join ".join(f"p as p{i}" for i in range(bits))
    return (
        "with rawdata as (with p as (select 0 as generated_number union all select 1),"
        f" unioned as (select {terms} + 1 as generated_number from {joins})"
        f" select * from unioned where generated_number <= {intervals}"
        " order by generated_number),"
        f" all_periods as (select ({start} + cast(row_number() over"
        f" (order by generated_number) - 1 as bigint) * interval 1 {datepart})"
        f" as date_{datepart} from rawdata),"
        f" filtered as (select * from all_periods where date_{datepart} <= {end})"
        " select * from filtered"
    )


_DAYS = "range(DATE '2025-12-01', DATE '2026-04-01', INTERVAL 1 DAY) AS r(d)"
# Views whose only source is the clock: their refresh pins the clock alone.
CLOCK_ONLY = {
    # dbt Labs' mrr-playbook util_months: months from June 2025 (the intervals up to the
    # day the model compiled, counted then), filtered up to today
    "util_months": _date_spine("month", "cast('2025-06-01' as date)", 12, "{today}"),
    "util_days": _date_spine("day", "cast('2025-12-20' as date)", 60, "{today}"),
    "last_week": "SELECT CAST(r.d AS DATE) AS day FROM range(DATE '2025-12-01',"
    " DATE '2026-04-01', INTERVAL 1 DAY) AS r(d) WHERE r.d <= {today}"
    " AND r.d > {today} - INTERVAL 7 DAY",
    "days_per_month": "SELECT date_trunc('month', s.date_day) AS month, count(*) AS days"
    " FROM (" + _date_spine("day", "cast('2025-12-20' as date)", 60, "{today}") + ") AS s"
    " GROUP BY date_trunc('month', s.date_day)",
    # the other operators over a spine up to today
    "days_numbered": "SELECT r.d, row_number() OVER (ORDER BY r.d DESC) AS n FROM"
    f" {_DAYS} WHERE r.d <= {{today}}",
    "last_three_days": f"SELECT r.d FROM {_DAYS} WHERE r.d <= {{today}} ORDER BY r.d DESC LIMIT 3",
    "months_seen": f"SELECT DISTINCT date_trunc('month', r.d) AS m FROM {_DAYS}"
    " WHERE r.d <= {today}",
    "days_but_holidays": f"SELECT r.d FROM {_DAYS} WHERE r.d <= {{today}} EXCEPT"
    " SELECT q.d FROM range(DATE '2026-01-01', DATE '2026-01-05', INTERVAL 1 DAY) AS q(d)",
    "with_a_constant_row": f"SELECT r.d FROM {_DAYS} WHERE r.d <= {{today}} UNION ALL"
    " SELECT TIMESTAMP '2020-01-01' AS d",
}
# a clock-only view with the clock outside a temporal filter (the series' bounds): rebuilt
# when the date moved, the reason stated
CLOCK_ONLY_REBUILT = {
    "series_to_today": "SELECT CAST(g.day AS DATE) AS day FROM generate_series("
    "CAST({today} AS TIMESTAMP) - INTERVAL 5 DAY, CAST({today} AS TIMESTAMP), INTERVAL 1 DAY)"
    " AS g(day)",
    "today": "SELECT {today} AS today, 1 AS one",  # no FROM: one row
}
REBUILT_VIEWS = {**REBUILT, **CLOCK_ONLY_REBUILT}


def _view(template: str) -> str:
    return template.format(today="current_date", now="now()", local="localtimestamp")


def _at(template: str, clock: datetime.datetime) -> str:
    """The view's SQL evaluated at ``clock``: each time function a literal."""
    text = clock.strftime("%Y-%m-%d %H:%M:%S+00")
    return template.format(
        today=f"CAST(TIMESTAMPTZ '{text}' AS DATE)",
        now=f"TIMESTAMPTZ '{text}'",
        local=f"CAST(TIMESTAMPTZ '{text}' AS TIMESTAMP)",
    )


def _set_clock(con, clock: datetime.datetime) -> None:
    con.execute(f"SET VARIABLE duckstream_now = TIMESTAMPTZ '{clock:%Y-%m-%d %H:%M:%S+00}'")


def _check(harness: DuckLakeHarness, plan, template: str, clock, context: str) -> None:
    actual = harness.result(plan.query_mv)
    expected = harness.result(_at(template, clock))
    check_result(_view(template), f"{context} at {clock}", expected, actual, False)


def _rows(first_day: datetime.date, n: int) -> list[tuple]:
    return [
        (
            i,
            first_day + datetime.timedelta(days=i % 20),
            datetime.datetime(2026, 1, 1) + datetime.timedelta(hours=11 * i),
            i % 4 - 1,
        )
        for i in range(n)
    ]


@pytest.fixture
def harness(tmp_path):
    con = connect_ducklake(str(tmp_path / "lake"), alias="dl")
    con.execute("SET TimeZone = 'UTC'")
    yield DuckLakeHarness(con)
    con.close()


def _create(harness: DuckLakeHarness) -> None:
    harness.create(TableSpec(EVENTS.name, EVENTS.columns, _rows(datetime.date(2026, 1, 1), 40)))
    harness.create(TableSpec(USERS.name, USERS.columns, [(i, f"u{i}") for i in range(0, 40, 3)]))


# -- the rewrite and the classification --------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "temporal"),
    [
        ("t.ts > now() - INTERVAL '7 days'", True),
        ("t.d >= current_date - 7", True),
        ("current_date >= t.d", True),
        ("t.d = today()", True),
        ("t.d BETWEEN current_date - 3 AND current_date", True),
        ("t.d >= date_trunc('month', current_date)", True),
        ("t.d + 1 > current_date", True),  # the row side may be any expression of the row
        ("t.d > 7 - current_date", False),  # decreasing in the clock
        ("t.d > current_date OR t.v = 1", False),  # not a comparison
        ("t.d - current_date > 3", False),  # the clock on the row's side
        ("current_date > DATE '2026-01-01'", False),  # no row
        ("t.d > current_date - t.v", False),  # a row's column in the clock's side
    ],
)
def test_which_conjuncts_are_temporal_filters(condition, temporal):
    assert is_temporal_filter(pin_clock(parse_one(condition, dialect="duckdb"))) is temporal


@pytest.mark.parametrize("name", sorted(TEMPORAL))
@pytest.mark.parametrize("schema", [False, True])
def test_temporal_filters_compile_to_a_temporal_filter_operator(name, schema):
    columns = tables_schema([EVENTS, USERS]) if schema else None
    plan = compile_ivm(_view(TEMPORAL[name]), mv_catalog="dl", schema=columns)
    assert "temporal_filter" in plan.features
    maintain = "\n".join(plan.maintain)
    assert "clock_old" in maintain and "clock_moved" in maintain
    assert "_ivm_clock('" not in maintain.lower() and "current_date" not in maintain.lower()


@pytest.mark.parametrize("name", sorted(REBUILT))
def test_the_clock_elsewhere_is_the_refreshs_value(name):
    plan = compile_ivm(_view(REBUILT[name]), mv_catalog="dl")
    assert "temporal_filter" not in plan.features
    # only the pin reads the recorded clock: the delta reads the refresh's
    assert [s.split(" ", 3)[:3] for s in plan.maintain if "clock_old" in s] == [
        ["SET", "VARIABLE", "_ivm_dl_main_mv_window"]
    ]


@pytest.mark.parametrize(
    ("sql", "function"),
    [
        ("SELECT k, random() AS r FROM t", "RAND"),
        ("SELECT k, uuid() AS u FROM t", "UUID"),
        ("SELECT k, gen_random_uuid() AS u FROM t", "UUID"),
        ("SELECT k FROM t WHERE ts < current_time", "CURRENT_TIME"),
    ],
)
def test_other_volatile_functions_stay_refused_by_name(sql, function):
    with pytest.raises(UnsupportedSQLError) as error:
        compile_ivm(sql, mv_catalog="dl")
    assert error.value.feature == "nondeterministic_function"
    assert function in str(error.value).upper()


def test_spark_reads_the_same_clock_but_refuses_localtimestamp_by_name():
    plan = compile_ivm(_view(TEMPORAL["last_7_days"]), dialect="spark")
    assert "temporal_filter" in plan.features
    with pytest.raises(UnsupportedSQLError) as error:
        compile_ivm("SELECT k FROM events WHERE ts <= localtimestamp()", dialect="spark")
    assert error.value.feature == "time" and "localtimestamp" in str(error.value)


# -- maintained on DuckLake with a clock the tests set ------------------------------------

DAY = datetime.timedelta(days=1)


@pytest.mark.parametrize("name", sorted(TEMPORAL))
@pytest.mark.parametrize("strategy", ["incremental", "auto"])
def test_a_temporal_filter_is_maintained_as_the_clock_moves(harness, name, strategy):
    _create(harness)
    template = TEMPORAL[name]
    plan = harness.compile(_view(template), schema=tables_schema([EVENTS, USERS]))
    clock = START
    _set_clock(harness.con, clock)
    setup(harness.con, plan)
    _check(harness, plan, template, clock, "after setup")
    steps = [2 * DAY, 0 * DAY, 3 * DAY + datetime.timedelta(hours=5), -4 * DAY, 40 * DAY]
    for n, step in enumerate(steps, 1):
        clock += step
        if n % 2:
            harness.apply(
                [Insert("events", ((100 + n, clock.date(), clock.replace(tzinfo=None), n),))]
            )
        if n == 3:
            harness.apply([Update("events", "d = d + 1, v = v + 1", "k % 5 = 0")])
        if n == 4:
            harness.apply([Delete("events", "k % 7 = 1")])
        _set_clock(harness.con, clock)
        report = refresh(harness.con, plan, strategy=strategy)
        assert report.strategy == "incremental" or strategy == "auto", report.reason
        _check(harness, plan, template, clock, f"after refresh {n} ({report.reason})")


@pytest.mark.parametrize("name", sorted(TEMPORAL))
def test_only_the_clock_moving_is_a_change(harness, name):
    """Under a derived table, an aggregate, a join: every operator above the temporal filter
    sees its crossings (the property's first counterexample: a derived table under GROUP BY
    whose guard read "did a source change?" alone)."""
    _create(harness)
    template = TEMPORAL[name]
    plan = harness.compile(_view(template))
    _set_clock(harness.con, START)
    setup(harness.con, plan)
    before = harness.rows(plan.query_mv)
    if "{today}" in template and "{now}" not in template and "{local}" not in template:
        _set_clock(harness.con, START + datetime.timedelta(hours=3))  # same day: nothing to do
        report = refresh(harness.con, plan)
        assert report.strategy == "incremental" and report.reason == "no source changed"
        assert sorted(harness.rows(plan.query_mv)) == sorted(before)
    for n, clock in enumerate([START + 2 * DAY, START + 30 * DAY, START - 5 * DAY], 1):
        _set_clock(harness.con, clock)
        report = refresh(harness.con, plan, strategy="incremental")
        _check(harness, plan, template, clock, f"after the clock alone moved ({n})")
    _set_clock(harness.con, START + 3 * DAY)
    report = refresh(harness.con, plan, policy=Policy(overhead_rows=0))
    assert report.strategy == "incremental"
    assert "the clock moved from 2026-01-05 12:00:00+00 to 2026-01-13 12:00:00+00" in report.reason
    _check(harness, plan, template, START + 3 * DAY, "after auto")


@pytest.mark.parametrize("template", [TEMPORAL["grouped"], CLOCK_ONLY["util_days"]])
def test_the_plan_as_plain_sql_reads_the_same_clock(harness, template):
    _create(harness)
    plan = harness.compile(_view(template))
    _set_clock(harness.con, START)
    for statement in [plan.create_cursors_table, plan.create_mv, *plan.initialize_cursors]:
        harness.con.execute(statement)
    _check(harness, plan, template, START, "after the plain SQL fill")
    for n, clock in enumerate([START + 3 * DAY, START + 3 * DAY, START - DAY], 1):
        harness.apply([Insert("events", ((200 + n, clock.date(), None, 5),))])
        _set_clock(harness.con, clock)
        for statement in plan.maintain:
            harness.con.execute(statement)
        _check(harness, plan, template, clock, f"after plain SQL refresh {n}")


@pytest.mark.parametrize("name", sorted(REBUILT_VIEWS))
def test_the_clock_elsewhere_rebuilds_when_it_moved_and_says_why(harness, name):
    _create(harness)
    template = REBUILT_VIEWS[name]
    plan = harness.compile(_view(template))
    _set_clock(harness.con, START)
    setup(harness.con, plan)
    harness.apply([Insert("events", ((300, START.date(), None, 1),))])
    _set_clock(harness.con, START + datetime.timedelta(hours=2))  # the same day
    report = refresh(harness.con, plan, strategy="incremental")
    _check(harness, plan, template, START, "the date did not move")
    moved = START + DAY
    _set_clock(harness.con, moved)
    with pytest.raises(RebuildRequired, match="moved from 2026-01-10 to 2026-01-11"):
        refresh(harness.con, plan, strategy="incremental")
    _check(harness, plan, template, START, "a refused refresh changes nothing")
    report = refresh(harness.con, plan)
    assert report.strategy == "full"
    assert report.reason == "the view reads current_date, which moved from 2026-01-10 to 2026-01-11"
    _check(harness, plan, template, moved, "after the rebuild")
    harness.apply([Delete("events", "k = 300")])
    refresh(harness.con, plan, strategy="incremental")
    _check(harness, plan, template, moved, "incremental again at the rebuild's clock")


def test_the_clock_is_recorded_with_the_cursors(harness):
    _create(harness)
    plan = harness.compile(_view(TEMPORAL["last_7_days"]))
    _set_clock(harness.con, START)
    setup(harness.con, plan)
    (info,) = harness.con.execute(
        "SELECT commit_extra_info FROM ducklake_snapshots('dl')"
        " WHERE commit_message = 'cursors of dl.main.mv' ORDER BY snapshot_id DESC LIMIT 1"
    ).fetchone()
    assert '"clock":"2026-01-10 12:00:00+00"' in info


def test_without_a_set_clock_the_refresh_reads_now(harness):
    _create(harness)
    template = TEMPORAL["last_7_days"]
    plan = harness.compile(_view(template))
    setup(harness.con, plan)
    harness.apply([Insert("events", ((400, datetime.date.today(), None, 1),))])
    refresh(harness.con, plan)
    today = datetime.datetime.now(datetime.UTC)
    _check(harness, plan, template, today, "at the real clock")


# -- views whose only source is the clock -------------------------------------------------


def _newest_snapshot(harness: DuckLakeHarness) -> int:
    return harness.con.execute("SELECT max(snapshot_id) FROM ducklake_snapshots('dl')").fetchone()[
        0
    ]


@pytest.mark.parametrize("name", sorted(CLOCK_ONLY))
def test_a_view_whose_only_source_is_the_clock_compiles_on_both_engines(name):
    for dialect in ("duckdb", "spark"):
        if dialect == "spark" and "range(" in CLOCK_ONLY[name]:
            with pytest.raises(UnsupportedSQLError) as error:  # a series of dates
                compile_ivm(_view(CLOCK_ONLY[name]), dialect=dialect)
            assert error.value.feature == "spark_unsupported" and "date_add" in str(error.value)
            continue
        plan = compile_ivm(_view(CLOCK_ONLY[name]), dialect=dialect)
        assert plan.sources == [] and "temporal_filter" in plan.features, dialect


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS x",
        "SELECT * FROM range(3) AS r(i) WHERE i > 0",
        "SELECT 1 AS x UNION ALL SELECT 2",
    ],
)
def test_a_view_of_constants_alone_is_refused(sql):
    """Neither a table nor the clock: nothing can change it, so nothing to maintain."""
    for dialect in ("duckdb", "spark"):
        with pytest.raises(UnsupportedSQLError) as error:
            compile_ivm(sql, dialect=dialect)
        assert error.value.feature == "no_source"
        assert "reads no table nor the clock" in error.value.message


@pytest.mark.parametrize("name", sorted(CLOCK_ONLY))
@pytest.mark.parametrize("strategy", ["incremental", "auto", "full"])
@pytest.mark.parametrize("schema", [False, True])
def test_a_clock_only_view_is_maintained_as_the_clock_moves(harness, name, strategy, schema):
    """Its refresh pins the clock alone: unmoved (the same day), nothing is done and
    nothing committed; moved, the days or months that crossed today are its changes."""
    _create(harness)
    template = CLOCK_ONLY[name]
    kwargs = {"schema": tables_schema([EVENTS, USERS])} if schema else {}
    plan = harness.compile(_view(template), **kwargs)
    _set_clock(harness.con, START)
    setup(harness.con, plan)
    _check(harness, plan, template, START, "after setup")
    harness.apply([Insert("events", ((500, START.date(), None, 1),))])  # not read by the view
    before = _newest_snapshot(harness)
    _set_clock(harness.con, START + datetime.timedelta(hours=5))
    report = refresh(harness.con, plan, strategy=strategy)
    if strategy != "full":
        assert report.strategy == "incremental"
        assert _newest_snapshot(harness) == before, "a refresh with nothing to do committed"
    if strategy == "auto":
        assert (
            report.reason == "the view reads no table, and the clock values it reads did not move"
        )
    _check(harness, plan, template, START, "the clock did not move")
    clocks = [START + 3 * DAY, START + 25 * DAY, START + 60 * DAY, START - 30 * DAY]
    old = START  # an unmoved clock is not recorded: nothing was committed
    for n, clock in enumerate([*clocks, clocks[-1] + datetime.timedelta(hours=2)], 1):
        _set_clock(harness.con, clock)
        report = refresh(harness.con, plan, strategy=strategy)
        assert report.strategy == ("full" if strategy == "full" else "incremental"), report
        if strategy == "auto" and clock.date() != old.date():
            assert report.reason == (
                f"the clock moved from {old:%Y-%m-%d %H:%M:%S}+00 to"
                f" {clock:%Y-%m-%d %H:%M:%S}+00: the rows that crossed the view's temporal"
                " filters are changes"
            )
        if clock.date() != old.date() or strategy == "full":
            old = clock
        _check(harness, plan, template, clock, f"after refresh {n} ({report.reason})")


def test_a_clock_only_view_records_its_clock_for_status_and_explain(harness):
    template = CLOCK_ONLY["util_months"]
    plan = harness.compile(_view(template))
    _set_clock(harness.con, START)
    setup(harness.con, plan)
    _set_clock(harness.con, START - 45 * DAY)  # two months back: November 2025
    refresh(harness.con, plan)
    (info,) = harness.con.execute(
        "SELECT commit_extra_info FROM ducklake_snapshots('dl')"
        " WHERE commit_message = 'cursors of dl.main.mv' ORDER BY snapshot_id DESC LIMIT 1"
    ).fetchone()
    assert '"cursors":[]' in info and '"clock":"2025-11-26 12:00:00+00"' in info
    assert "the clock moved from 2026-01-10 12:00:00+00 to 2025-11-26 12:00:00+00" in info
    (status,) = views_status(harness.con, "dl")
    assert status.view == "dl.main.mv" and status.pending == 0 and status.cursors == {}
    assert "the clock moved from 2026-01-10" in status_text([status])
    assert "dl.main.mv: cursors none (it reads only the clock)" in status_text([status])
    text = explain(_view(template)).text()
    assert "  the clock: current_date (its only source: no table)\n" in text
    assert "temporal filter all_periods.date_month <= current_date" in text
    assert "constant relation date_month" in text


# -- the property: random windows, the clock moving by random amounts ---------------------

EXAMPLES = examples(10, 300)

_batch = st.lists(
    st.one_of(
        st.builds(
            lambda k, hour, v: Insert(
                "events",
                (
                    (
                        k,
                        (datetime.datetime(2026, 1, 1) + datetime.timedelta(hours=hour)).date(),
                        datetime.datetime(2026, 1, 1) + datetime.timedelta(hours=hour),
                        v,
                    ),
                ),
            ),
            st.integers(0, 60),
            st.integers(-120, 1000),
            st.integers(-2, 3),
        ),
        st.builds(
            lambda m, r: Delete("events", f"k % {m} = {r}"), st.integers(3, 9), st.integers(0, 2)
        ),
        st.builds(
            lambda n, m: Update("events", f"d = d + {n}, v = v + 1", f"k % {m} = 1"),
            st.integers(-6, 6),
            st.integers(2, 7),
        ),
    ),
    max_size=3,
)
# the clock's step between refreshes, in hours: often none, sometimes back
_step = st.one_of(st.just(0), st.integers(-72, 240), st.sampled_from([24, 48, -24]))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    name=st.sampled_from(sorted({**TEMPORAL, **REBUILT_VIEWS, **CLOCK_ONLY})),
    windows=st.lists(st.tuples(st.lists(_batch, max_size=2), _step), min_size=1, max_size=4),
    schema=st.booleans(),
    strategy=st.sampled_from(["incremental", "auto"]),
    inlining=st.sampled_from([0, None]),
)
def test_property_random_windows_and_clocks(
    tmp_path_factory, name, windows, schema, strategy, inlining
):
    directory = tmp_path_factory.mktemp("lake")
    con = connect_ducklake(str(directory / "lake"), alias="dl", data_inlining_row_limit=inlining)
    try:
        con.execute("SET TimeZone = 'UTC'")
        harness = DuckLakeHarness(con)
        _create(harness)
        template = {**TEMPORAL, **REBUILT_VIEWS, **CLOCK_ONLY}[name]
        kwargs = {"schema": tables_schema([EVENTS, USERS])} if schema else {}
        plan = harness.compile(_view(template), **kwargs)
        clock = START
        _set_clock(con, clock)
        setup(con, plan)
        _check(harness, plan, template, clock, "after setup")
        for n, (batches, hours) in enumerate(windows, 1):
            for batch in batches:
                harness.apply(batch)
            clock += datetime.timedelta(hours=hours)
            _set_clock(con, clock)
            try:
                refresh(con, plan, strategy=strategy)
            except RebuildRequired:
                assert strategy == "incremental" and name in REBUILT_VIEWS
                refresh(con, plan, strategy="full")
            _check(harness, plan, template, clock, f"after refresh {n}")
    finally:
        con.close()


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    name=st.sampled_from(sorted({**CLOCK_ONLY, **CLOCK_ONLY_REBUILT})),
    # the clock's steps, in hours: none, within a day, across days and months, back
    hours=st.lists(
        st.one_of(st.just(0), st.integers(-1440, 1440), st.sampled_from([3, 24, -24, 744])),
        min_size=1,
        max_size=5,
    ),
    strategy=st.sampled_from(["incremental", "auto", "full", "plain SQL"]),
    schema=st.booleans(),
)
def test_property_clock_only_views_through_random_clocks(
    tmp_path_factory, name, hours, strategy, schema
):
    """A view whose only source is the clock, refreshed by the runner (each strategy) or by
    the plan's plain SQL as the clock moves by random steps, equals the view evaluated at
    each clock."""
    directory = tmp_path_factory.mktemp("lake")
    con = connect_ducklake(str(directory / "lake"), alias="dl")
    try:
        con.execute("SET TimeZone = 'UTC'")
        harness = DuckLakeHarness(con)
        template = {**CLOCK_ONLY, **CLOCK_ONLY_REBUILT}[name]
        kwargs = {"schema": tables_schema([EVENTS, USERS])} if schema else {}
        plan = harness.compile(_view(template), **kwargs)
        clock = START
        _set_clock(con, clock)
        setup(con, plan)
        for n, step in enumerate(hours, 1):
            clock += datetime.timedelta(hours=step)
            _set_clock(con, clock)
            if strategy == "plain SQL":
                try:
                    for statement in plan.maintain:
                        con.execute(statement)
                except duckdb.Error as error:
                    assert "rebuild required" in str(error) and name in CLOCK_ONLY_REBUILT
                    con.execute("ROLLBACK")
                    refresh(con, plan, strategy="full")
            else:
                try:
                    refresh(con, plan, strategy=strategy)
                except RebuildRequired:
                    assert strategy == "incremental" and name in CLOCK_ONLY_REBUILT
                    refresh(con, plan, strategy="full")
            _check(harness, plan, template, clock, f"after refresh {n} ({strategy})")
    finally:
        con.close()


# -- the operator's delta rule against its definition, on plain tables --------------------


class _PlainClock(DuckLakeEngine):
    """States and changes are the tables ``old_events``, ``new_events``, ``delta_events``;
    the clock is ``old`` / ``new`` (dates), set per case."""

    old = new = datetime.date(2026, 1, 1)

    def state(self, source, version):
        prefix = "old" if version is Version.OLD else "new"
        return exp.select("*").from_(f"{prefix}_{source.name}")

    def changes(self, source):
        return exp.select("*").from_(f"delta_{source.name}")

    def changed(self, source):
        return exp.true()

    def clock(self, version, kind):
        day = self.old if version is Version.OLD else self.new
        return exp.cast(exp.cast(exp.Literal.string(f"{day} 12:00:00+00"), "timestamptz"), "date")

    def clock_moved(self):
        return exp.true()


OPERATOR_VIEWS = [
    "SELECT k, d FROM events WHERE d >= current_date - 3 AND d <= current_date",
    "SELECT v, count(*) AS n FROM events WHERE d > current_date - 2 GROUP BY v",
    "SELECT DISTINCT v FROM events WHERE d BETWEEN current_date - 1 AND current_date + 1",
    "SELECT k FROM events WHERE current_date = d AND v > 0",
]


@settings(max_examples=4 * examples(25, 300), deadline=None)
@given(
    view=st.sampled_from(OPERATOR_VIEWS),
    old_rows=st.lists(
        st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 12)), st.integers(0, 2)),
        max_size=8,
    ),
    kept=st.lists(st.booleans(), min_size=8, max_size=8),
    inserted=st.lists(
        st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(0, 12)), st.integers(0, 2)),
        max_size=4,
    ),
    clocks=st.tuples(st.integers(0, 12), st.integers(0, 12)),
)
def test_the_temporal_filter_delta_rule_against_its_definition(
    view, old_rows, kept, inserted, clocks
):
    """``Q.delta`` = ``Q(new rows at the new clock) - Q(old rows at the old clock)``, the
    right side the view itself with the clock a literal, run by DuckDB."""
    first = datetime.date(2026, 1, 1)

    def dated(rows_):
        return [
            (k, None if d is None else first + datetime.timedelta(days=d), v) for k, d, v in rows_
        ]

    old, added = dated(old_rows), dated(inserted)
    new = [r for r, keep in zip(old, kept, strict=False) if keep] + added
    gone = [r for r, keep in zip(old, kept, strict=False) if not keep]
    old_clock, new_clock = (first + datetime.timedelta(days=c) for c in clocks)
    select = normalize(
        parse_one(view, dialect="duckdb"), dialect="duckdb", catalog="dl", schema="main"
    )
    engine = _PlainClock()
    engine.old, engine.new = old_clock, new_clock
    found = {}

    def resolve(table):
        return found.setdefault(table.name, Source(table.catalog, table.db, table.name, len(found)))

    ctx = Context(engine=engine)
    relation = build_relation(select, ctx, resolve)
    engine.bind(Target("dl", "main", "mv", "_ivm_cursors"), list(found.values()))
    con = duckdb.connect()
    try:
        for name, rows_ in (("old", old), ("new", new)):
            con.execute(f"CREATE TABLE {name}_events (k INTEGER, d DATE, v INTEGER)")
            if rows_:
                con.executemany(f"INSERT INTO {name}_events VALUES (?, ?, ?)", rows_)
        con.execute("CREATE TABLE delta_events (k INTEGER, d DATE, v INTEGER, _ivm_mult BIGINT)")
        feed = [(*r, 1) for r in added] + [(*r, -1) for r in gone]
        if feed:
            con.executemany("INSERT INTO delta_events VALUES (?, ?, ?, ?)", feed)
        delta: Counter = Counter()
        for *row, mult in con.execute(relation.delta(ctx).sql("duckdb")).fetchall():
            delta[tuple(row)] += mult

        def defined(table: str, day: datetime.date) -> Counter:
            sql = view.replace("current_date", f"DATE '{day}'").replace("events", table)
            return Counter(con.execute(sql).fetchall())

        expected = defined("new_events", new_clock)
        expected.subtract(defined("old_events", old_clock))
    finally:
        con.close()
    assert {k: v for k, v in delta.items() if v} == {k: v for k, v in expected.items() if v}
