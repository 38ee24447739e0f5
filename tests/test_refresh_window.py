"""The DuckLake refresh window: the rules of ``window_from`` (engines/ducklake/window.py) on
hand-made snapshot lists, and a view whose sources live in two DuckLake catalogs refreshed
through windows where one, the other or both changed."""

from __future__ import annotations

import re

import pytest

from duckstream import compile_ivm
from duckstream.engines.ducklake.window import WindowSpec, changed_tables, window_from
from duckstream.errors import RebuildRequired
from duckstream.runtime import refresh, setup
from duckstream.testing.differential import as_multiset
from duckstream.testing.ducklake import attach_ducklake

SPEC = WindowSpec("v", "dl.main.mv", ["dl", "raw"], ["dl.main.a", "raw.main.b"])
# The view built at dl's snapshot 2 (table a is 1) and raw's snapshot 5 (table b is 7).
CURSORS = [("dl.main.a", 1, 2), ("raw.main.b", 7, 5)]
BUILT = {0: [(2, "inserted_into_table:1"), (3, 'created_table:"main"."mv"')], 1: [(5, None)]}


def _window(later: dict[int, list[tuple[int, str]]], cursors=CURSORS, built=BUILT):
    log = {k: built.get(k, []) + later.get(k, []) for k in (0, 1)}
    ends = {k: max((s for s, _ in log[k]), default=0) for k in (0, 1)}
    return window_from(SPEC, cursors, ends, log)


def test_each_source_is_bounded_by_its_own_catalog():
    window = _window({1: [(6, "inlined_delete:7")]})
    assert window.values["end_0"] == 3 and window.values["end_1"] == 6
    assert window.sources == {"dl.main.a": (1, 2, 3), "raw.main.b": (7, 5, 6)}
    assert (window.values["changed_0"], window.values["changed_1"]) == (False, True)
    assert (window.values["inserts_1"], window.values["deletes_1"]) == (False, True)
    assert window.values["changed"] is True


def test_a_table_id_of_another_catalog_is_not_a_change():
    window = _window({1: [(6, "inserted_into_table:1")]})
    assert window.values["changed"] is False  # raw's table 1 is not dl's table 1


def test_an_update_has_inserts_and_deletes_and_other_kinds_count_as_both():
    window = _window(
        {0: [(4, "inserted_into_table:1,deleted_from_table:1")], 1: [(6, "inline_flush:7")]}
    )
    assert (window.values["inserts_0"], window.values["deletes_0"]) == (True, True)
    assert (window.values["inserts_1"], window.values["deletes_1"]) == (True, True)


def test_only_changes_after_the_cursor_count():
    window = _window({0: [(4, 'created_table:"main"."x,inserted_into_table:1"')]})
    assert window.values["changed"] is False  # a table name, not a change of table 1
    assert (
        _window({}, built={0: [(1, "inserted_into_table:1"), *BUILT[0]], 1: BUILT[1]}).values[
            "changed"
        ]
        is False
    )  # snapshot 1 was applied already


def test_unreadable_change_lists_stop_the_refresh():
    with pytest.raises(ValueError, match="unreadable"):
        changed_tables("inserted_into_table:1,???")


@pytest.mark.parametrize(
    ("cursors", "later", "reason"),
    [
        ([], {}, "no cursors recorded (the view was never built)"),
        (CURSORS[:1], {}, "no single cursor for every source (initialize the view)"),
        ([*CURSORS, CURSORS[0]], {}, "no single cursor for every source (initialize the view)"),
        ([("dl.main.a", 1, 1), CURSORS[1]], {}, "the cursor snapshot 1 of dl.main.a was expired"),
        (CURSORS, {1: [(6, "altered_table:7")]}, "source raw.main.b was altered or recreated"),
        (CURSORS, {0: [(4, "dropped_table:1")]}, "source dl.main.a was altered or recreated"),
    ],
)
def test_windows_that_cannot_be_maintained(cursors, later, reason):
    with pytest.raises(RebuildRequired, match=re.escape(reason)) as raised:
        _window(later, cursors=cursors)
    assert str(raised.value).startswith("duckstream: rebuild required: ")


def test_a_view_over_two_catalogs(lake, tmp_path):
    attach_ducklake(lake, str(tmp_path / "raw"), "raw")
    lake.execute("CREATE TABLE dl.main.a (k INTEGER, x INTEGER)")
    lake.execute("CREATE TABLE raw.main.b (k INTEGER, y INTEGER)")
    lake.execute("INSERT INTO dl.main.a VALUES (1, 10), (2, 20), (2, 21), (NULL, 5)")
    lake.execute("INSERT INTO raw.main.b VALUES (1, 100), (2, 200), (3, 300)")
    view = (
        "SELECT a.k, count(*) AS n, sum(a.x + b.y) AS total"
        " FROM dl.main.a AS a JOIN raw.main.b AS b ON a.k = b.k GROUP BY a.k"
    )
    plan = compile_ivm(view, mv_name="mv", mv_catalog="dl", mv_schema="main")
    setup(lake, plan)
    windows = [
        ["INSERT INTO raw.main.b VALUES (1, 101), (4, 400)"],  # only raw
        ["DELETE FROM dl.main.a WHERE x = 21", "INSERT INTO dl.main.a VALUES (4, 40)"],  # only dl
        ["UPDATE raw.main.b SET y = y + 1 WHERE k = 2", "DELETE FROM dl.main.a WHERE k = 1"],
        [],  # nothing
        ["DELETE FROM raw.main.b WHERE k = 4", "INSERT INTO dl.main.a VALUES (3, 30), (3, 30)"],
    ]
    for number, changes in enumerate(windows):
        for statement in changes:
            lake.execute(statement)
        strategy = "auto" if number % 2 else "incremental"
        refresh(lake, plan, strategy=strategy)
        got = as_multiset(lake.execute(plan.query_mv).fetchall())
        assert got == as_multiset(lake.execute(view).fetchall()), f"after window {number}"
