"""The DuckLake refresh window: the rules of :func:`duckstream.ducklake_window.window_from` on
hand-made snapshot lists, and a view whose sources live in two DuckLake catalogs refreshed
through windows where one, the other or both changed."""

from __future__ import annotations

import json
import re

import pytest

from duckstream import compile_ivm
from duckstream.ducklake_window import WindowSpec, window_from
from duckstream.errors import RebuildRequired
from duckstream.runtime import refresh, setup
from duckstream.testing.differential import as_multiset
from duckstream.testing.ducklake import attach_ducklake

SPEC = WindowSpec("v", "dl.main.mv", ["dl", "raw"], ["dl.main.a", "raw.main.b"])


def _commit(catalog: int, snapshot: int, changes: dict, cursors: list | None = None) -> tuple:
    if cursors is None:
        return (catalog, snapshot, changes, None, None, None)
    info = json.dumps(
        {"cursors": [{"source": s, "table_id": t, "snapshot": n} for s, t, n in cursors]}
    )
    return (catalog, snapshot, changes, "duckstream", "cursors of dl.main.mv", info)


def _lists(*later: tuple) -> list[tuple]:
    """Both catalogs' snapshot lists: the view built at dl's snapshot 2 (cursor of a: 2,
    table 1) and raw's snapshot 5 (table 7), then ``later``."""
    return [
        _commit(0, 1, {"tables_created": ["main.a"]}),
        _commit(0, 2, {"tables_inserted_into": ["1"]}),
        _commit(0, 3, {"tables_created": ["main.mv"]}, [("dl.main.a", 1, 2), ("raw.main.b", 7, 5)]),
        _commit(1, 4, {"tables_created": ["main.b"]}),
        _commit(1, 5, {"inlined_insert": ["7"]}),
        *later,
    ]


def test_each_source_is_bounded_by_its_own_catalog():
    window = window_from(SPEC, _lists(_commit(1, 6, {"inlined_delete": ["7"]})))
    assert window.values["end_0"] == 3 and window.values["end_1"] == 6
    assert window.sources == {"dl.main.a": (1, 2, 3), "raw.main.b": (7, 5, 6)}
    assert (window.values["changed_0"], window.values["changed_1"]) == (False, True)
    assert (window.values["inserts_1"], window.values["deletes_1"]) == (False, True)
    assert window.values["changed"] is True


def test_a_table_id_of_another_catalog_is_not_a_change():
    window = window_from(SPEC, _lists(_commit(1, 6, {"tables_inserted_into": ["1"]})))
    assert window.values["changed"] is False  # raw's table 1 is not dl's table 1


def test_an_update_has_inserts_and_deletes_and_other_kinds_count_as_both():
    window = window_from(
        SPEC,
        _lists(
            _commit(0, 4, {"tables_inserted_into": ["1"], "tables_deleted_from": ["1"]}),
            _commit(1, 6, {"flushed_inlined": ["7"]}),
        ),
    )
    assert (window.values["inserts_0"], window.values["deletes_0"]) == (True, True)
    assert (window.values["inserts_1"], window.values["deletes_1"]) == (True, True)


def test_the_newest_cursors_win():
    later = _commit(0, 9, {"inlined_insert": ["3"]}, [("dl.main.a", 1, 8), ("raw.main.b", 7, 5)])
    rows = _lists(_commit(0, 8, {"tables_inserted_into": ["1"]}), later)
    window = window_from(SPEC, rows)
    assert window.sources["dl.main.a"] == (1, 8, 9)
    assert window.values["changed_0"] is False  # the insert at 8 was applied already


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([_commit(0, 1, {}), _commit(1, 1, {})], "no cursors recorded (the view was never built)"),
        (
            [_commit(0, 3, {}, [("dl.main.a", 1, 3)]), _commit(1, 1, {})],
            "no single cursor for every source (initialize the view)",
        ),
        (
            [_commit(0, 3, {}, [("dl.main.a", 1, 3), ("dl.main.a", 1, 3), ("raw.main.b", 7, 1)])],
            "no single cursor for every source (initialize the view)",
        ),
        (
            [r for r in _lists() if r[:2] != (0, 2)],  # dl's snapshot 2 was expired
            "cursor snapshot of dl.main.a was expired",
        ),
        (_lists(_commit(1, 6, {"tables_altered": ["7"]})), "source raw.main.b was altered"),
        (_lists(_commit(0, 4, {"tables_dropped": ["1"]})), "source dl.main.a was altered"),
    ],
)
def test_windows_that_cannot_be_maintained(rows, reason):
    with pytest.raises(RebuildRequired, match=re.escape(reason)) as raised:
        window_from(SPEC, rows)
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
