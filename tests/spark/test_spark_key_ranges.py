"""The join's key ranges on Spark (``engines/iceberg/key_ranges.py``): the bounds of each
changed key, read from the window's data files, filter the states the changes join. A bound
too narrow loses rows, so the windows here are the ones that can get it wrong: keys of both
signs, NULL keys (alone in a data file too), a DATE, a DECIMAL and a non-ASCII STRING key,
a window that only deletes (copy-on-write: the deleted row's key is only in the data file the
window removed), and both sides changed at once."""

from __future__ import annotations

import pytest

from duckstream.engines.iceberg.key_ranges import KeyRanges
from duckstream.engines.iceberg.steps import run_steps
from duckstream.plan import IVMPlan, SetValues
from duckstream.testing.differential import Column, Delete, Insert, TableSpec, Update
from duckstream.testing.spark_harness import SparkHarness

pytestmark = pytest.mark.spark

COLUMNS = [
    Column("k", "BIGINT"),
    Column("d", "DATE"),
    Column("x", "DECIMAL(10,2)"),
    Column("s", "VARCHAR"),
]
ROWS = [
    (-5, "2020-01-01", "-1.50", "Größe", 1),
    (7, "2020-01-07", "2.25", "b", 2),
    (None, None, None, None, 3),
    (100, "2021-01-01", "10.00", "zz", 4),
]
VIEWS = {
    "inner": "SELECT a.k, a.d, a.v, b.w FROM a JOIN b ON a.k = b.k AND a.d = b.d",
    "left": (
        "SELECT a.s, count(b.w) AS n, sum(a.v) AS total FROM a LEFT JOIN b"
        " ON a.x = b.x AND a.s = b.s GROUP BY a.s"
    ),
}
WINDOWS = [
    # appends to a, one of its keys NULL
    [Insert("a", ((7, "2020-01-07", "2.25", "b", 5), (None, None, None, None, 6)))],
    # b only deletes: its key -5 is only in the data file the delete removed
    [Delete("b", "k = -5")],
    # both sides: a key changes sign, its new partner arrives, NULL keys alone in a file
    [
        Update("a", "k = -k", "k = 100"),
        Insert("b", ((-100, "2021-01-01", "10.00", "zz", 50),)),
        Insert("b", ((None, None, None, None, 60),)),
    ],
    [Insert("a", ((None, None, None, None, 7),))],  # only NULL keys: no bound
]


def _ranges(plan: IVMPlan) -> dict[tuple[str, str], tuple[str, str]]:
    """(table, column) -> the names of its range's low and high values."""
    (spec,) = [
        s.spec
        for s in plan.steps["maintain"]
        if isinstance(s, SetValues) and isinstance(s.spec, KeyRanges)
    ]
    return {(r.table.rsplit(".", 1)[1], r.column): (r.low, r.high) for r in spec.ranges}


def test_key_ranges_keep_every_joined_row(spark) -> None:
    harness = SparkHarness(spark)
    for name, extra in (("a", "v"), ("b", "w")):
        columns = [*COLUMNS, Column(extra, "INTEGER")]
        harness.create(TableSpec(name, columns, [tuple(r) for r in ROWS]))
    plans = {}
    for name, view in VIEWS.items():
        plans[name] = harness.compile(view, mv_name=f"mv_{name}")
        harness.setup(plans[name])
    found: dict[str, list[dict[tuple[str, str], tuple[str, str]]]] = {n: [] for n in VIEWS}
    for i, window in enumerate(WINDOWS):
        for batch in window:
            harness.apply([batch])
        for name, plan in plans.items():
            values = run_steps(spark, plan.steps["maintain"])
            found[name].append(
                {key: (values[low], values[high]) for key, (low, high) in _ranges(plan).items()}
            )
            harness.check(plan, VIEWS[name], f"{name}, after window {i + 1}")
    # The bounds are the data files', whose rows Spark splits as it likes: exact where a key
    # is the least (or greatest) of all, else a bound.
    null = ("NULL", "NULL")
    inner, left = found["inner"], found["left"]
    # window 1: a's appended keys (its NULL key bounds nothing); b did not change
    assert inner[0][("a", "k")] == ("7", "7")
    assert inner[0][("a", "d")] == ("DATE '2020-01-07'", "DATE '2020-01-07'")
    assert inner[0][("b", "k")] == null
    # window 2: the deleted key -5, only in the data file the delete removed
    assert inner[1][("b", "k")][0] == "-5"
    assert left[1][("b", "x")][0] == "CAST('-1.50' AS DECIMAL(10,2))"
    assert left[1][("b", "s")][0] == "CAST(X'" + "Größe".encode().hex().upper() + "' AS STRING)"
    # window 3: keys of both signs on a; b's file of NULL keys alone adds no bound
    assert inner[2][("a", "k")] == ("-100", "100")
    assert inner[2][("b", "k")] == ("-100", "-100")
    # window 4: only NULL keys changed
    assert inner[3][("a", "k")] == null


def test_key_ranges_run_by_hand(spark, run_by_hand) -> None:
    """The plan as a person runs it (SET + ``${...}``): the ranges from its value query."""
    harness = SparkHarness(spark)
    for name, extra in (("a", "v"), ("b", "w")):
        columns = [*COLUMNS, Column(extra, "INTEGER")]
        harness.create(TableSpec(name, columns, [tuple(r) for r in ROWS]))
    view = VIEWS["inner"]
    plan = harness.compile(view)
    harness.setup(plan)
    harness.apply([Insert("a", ((-5, "2020-01-01", "0.00", "c", 8),)), Delete("b", "k = 7")])
    run_by_hand(plan)
    harness.check(plan, view, "after a refresh by hand")
