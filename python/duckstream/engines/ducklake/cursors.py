"""Where a DuckLake view's cursors live: in the snapshot its last refresh committed.

A refresh (or a build) of a view sets its commit's author to ``duckstream``, its message to
``cursors of <catalog.schema.view>`` and its extra info to the new cursors as JSON, so the
cursors are written by the very commit that changes the view: atomic with it by construction.
Reading them is a query over the catalog's snapshot log (``ducklake_snapshot_changes``), which
DuckLake keeps in its metadata database: no table scan. A cursors *table* cost every refresh
one more DuckLake table read and an UPDATE (~10-15 ms each, and a cold read loads a catalog
version, ~20 ms).

DuckLake only makes a snapshot when something changed, so a refresh that advances the
cursors and writes nothing else (its changes leave the view as it was) appends their rows to
the view's cursors table: an append-only log that duckstream never reads (an INSERT needs no
read), which guarantees the commit (old rows may be deleted at will). A commit that writes
the view's table makes its snapshot anyway: the runner appends no row then (a second table
in a commit costs DuckLake 6-7 ms). The history of a view's cursors is its commits
(``ducklake_snapshots``, message ``cursors of <view>``).

The extra info also holds how long the path that made the commit took (``measured``, set by
the runner, NULL from plain SQL): auto reads the view's recent measurements from the same log
(:func:`history`, :func:`duckstream.strategy.calibrate`). ``measured`` is the refresh's whole
history entry (:class:`duckstream.history.Entry`: also who asked, why, rows in and out, its
phases), which ``status`` lists.

>>> message("lake.main.revenue")
'cursors of lake.main.revenue'
>>> record("lake", "lake.main.v", [("lake.main.t", "3", "17")])[:80]
"CALL ducklake_set_commit_message('lake', 'duckstream', 'cursors of lake.main.v',"
"""

from __future__ import annotations

import json

from duckstream.connection import Connection
from duckstream.connection import literal as _lit
from duckstream.engines.ducklake.names import quote
from duckstream.history import Entry
from duckstream.strategy import History, Measured

AUTHOR = "duckstream"


MESSAGE_PREFIX = "cursors of "


def message(view: str) -> str:
    """The commit message that marks a commit holding ``view``'s cursors."""
    return f"{MESSAGE_PREFIX}{view}"


def record(
    catalog: str,
    view: str,
    cursors: list[tuple[str, str, str]],
    measured: str | None = None,
    clock: str | None = None,
) -> str:
    """A statement, inside the refresh's transaction, making its commit carry the cursors
    ``(source, table id SQL, snapshot SQL)`` of ``view`` (a catalog of DuckLake ``catalog``),
    the JSON measurement in the run-time variable ``measured``, when given, and the clock
    the refresh read (``clock``: SQL of a ``TIMESTAMPTZ``), for a view that reads it."""
    items = ", ".join(
        f"struct_pack(source := {_lit(source)}, table_id := CAST({table_id} AS BIGINT),"
        f" snapshot := CAST({snapshot} AS BIGINT))"
        for source, table_id, snapshot in cursors
    )
    fields = f"cursors := [{items}]"
    if measured is not None:
        fields += f", measured := CAST(getvariable({_lit(measured)}) AS JSON)"
    if clock is not None:
        fields += f", clock := CAST({clock} AS VARCHAR)"
    info = f"to_json(struct_pack({fields}))::VARCHAR"
    return (
        f"CALL ducklake_set_commit_message({_lit(catalog)}, {_lit(AUTHOR)},"
        f" {_lit(message(view))}, extra_info => {info})"
    )


def metadata_database(catalog: str) -> str:
    """The quoted name of the database holding DuckLake ``catalog``'s metadata tables.

    >>> metadata_database("lake")
    '"__ducklake_metadata_lake"'
    """
    return quote(f"__ducklake_metadata_{catalog}")


def newest_query(catalog: str, view: str, until: str | None = None, limit: int = 1) -> str:
    """A query of ``(snapshot_id, commit_extra_info)`` of the newest commit of DuckLake
    ``catalog`` that recorded ``view``'s cursors (no row when none did), no newer than the
    snapshot SQL ``until`` when given."""
    bound = f" AND snapshot_id <= {until}" if until else ""
    return f"{commits_query(catalog, view)}{bound} ORDER BY snapshot_id DESC LIMIT {int(limit)}"


def commits_query(catalog: str, view: str) -> str:
    """A query of ``(snapshot_id, commit_extra_info)`` of every commit of DuckLake
    ``catalog`` that recorded ``view``'s cursors (ends with its WHERE clause)."""
    meta = metadata_database(catalog)
    return (
        f"SELECT snapshot_id, commit_extra_info FROM {meta}.ducklake_snapshot_changes"
        f" WHERE author = {_lit(AUTHOR)} AND commit_message = {_lit(message(view))}"
    )


def parse(info: str) -> list[tuple[str, int, int]]:
    """The cursors ``(source, table id, snapshot)`` a commit's extra info holds.

    >>> parse('{"cursors": [{"source": "l.m.t", "table_id": 5, "snapshot": 1}]}')
    [('l.m.t', 5, 1)]
    """
    cursors = json.loads(info)["cursors"]
    return [(c["source"], int(c["table_id"]), int(c["snapshot"])) for c in cursors]


def recorded_clock(info: str) -> str | None:
    """The clock a commit's extra info holds (a ``TIMESTAMPTZ`` as text; None: none).

    >>> recorded_clock('{"cursors": [], "clock": "2026-01-08 00:00:00+00"}')
    '2026-01-08 00:00:00+00'
    >>> recorded_clock('{"cursors": []}')
    """
    found = json.loads(info).get("clock")
    return None if found is None else str(found)


HISTORY = 16  # the newest commits of a view's cursors that auto reads its measurements from


def history(con: Connection, catalog: str, view: str) -> History:
    """``view``'s newest measurement of each path, among its :data:`HISTORY` newest commits."""
    rows = con.execute(newest_query(catalog, view, limit=HISTORY)).fetchall()
    return History.of(m for _, info in rows if (m := measurement(info)) is not None)


def measurement(info: str) -> Measured | None:
    """The measurement a commit's extra info holds (None: none, as from plain SQL).

    >>> measurement('{"cursors": [], "measured": {"path": "full", "ms": 9.5, "cost": null}}')
    Measured(path='full', ms=9.5, cost=None)
    >>> measurement('{"cursors": [], "measured": null}')
    """
    found = json.loads(info).get("measured")
    if not isinstance(found, dict):
        return None
    cost = found.get("cost")
    return Measured(str(found["path"]), float(found["ms"]), None if cost is None else float(cost))


def source_rows(info: str) -> dict[str, tuple[int, int]]:
    """Per source, the ``(snapshot, rows)`` a commit's history entry recorded (on a catalog
    other processes commit to; else none).

    >>> entry = '{"path": "full", "source_rows": {"l.m.t": [4, 20]}}'
    >>> source_rows('{"cursors": [], "measured": ' + entry + "}")
    {'l.m.t': (4, 20)}
    >>> source_rows('{"cursors": [], "measured": null}')
    {}
    """
    found = json.loads(info).get("measured")
    return Entry.from_dict(found).source_rows if isinstance(found, dict) else {}


def read(con: Connection, catalog: str, view: str) -> dict[str, tuple[int, int]] | None:
    """``view``'s cursors, source -> (table id, snapshot); ``None`` when none were recorded."""
    rows = con.execute(newest_query(catalog, view)).fetchall()
    if not rows:
        return None
    return {source: (table_id, snapshot) for source, table_id, snapshot in parse(rows[0][1])}
