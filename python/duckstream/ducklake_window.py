"""Pin a DuckLake refresh window: read the catalog's snapshot log, check it in Python.

A refresh's window is, per catalog, the end snapshot it applies up to and, per source, the
cursor it starts from, the source's table id and whether (and how) the source changed in
between. The runner (:func:`duckstream.runtime.run_statements`) pins it when it meets the
plan's directive statement::

    -- duckstream: pin window {"variable": ..., "view": ..., "catalogs": [...], "sources": [...]}

with two plain reads of the catalogs' metadata (:func:`read`): each catalog's end (the
transaction's snapshot, ``ducklake_current_snapshot``) with the view's cursors (the extra info
of the newest commit that recorded them, :mod:`duckstream.ducklake_cursors`); then each
catalog's snapshot log from its oldest cursor to its end. :func:`window_from` checks those
rows, and the runner sets the window variable to the literal result. This is what every
refresh pays before it reads any change, so it is kept small on purpose:

* the same checks as one SQL statement took DuckDB ~20 ms to *plan* for ~4 ms of work;
* ``ducklake_snapshots()`` lists a catalog's whole history (~10 ms per 1,000 snapshots, and a
  lake gains a snapshot with every commit); the log since the cursors is a few rows.

To run a plan by hand: run the two reads of :func:`read`, apply :func:`window_from`'s rules
(spelled out in its docstring) and ``SET VARIABLE <variable> = <the struct>``.

>>> spec = WindowSpec("v", "lake.main.mv", ["lake"], ["lake.main.t"])
>>> log = {0: [(1, "inserted_into_table:5"), (2, "inlined_insert:7"), (3, "inlined_insert:5")]}
>>> window = window_from(spec, [("lake.main.t", 5, 1)], {0: 3}, log)
>>> window.sources["lake.main.t"], window.values["changed_0"], window.kinds["lake.main.t"]
((5, 1, 3), True, frozenset({'inlined_insert'}))
>>> window.values["inserts_0"], window.values["deletes_0"]
(True, False)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from duckstream import ducklake_cursors
from duckstream.errors import RebuildRequired

DIRECTIVE = "-- duckstream: pin window "

# Change kinds of DuckLake's snapshot log (``changes_made``) that only add rows, or only remove
# rows: a window with nothing else for a source skips reading the other half of its change
# feed (each ``ducklake_table_insertions/deletions`` call costs ~5 ms).
INSERT_KINDS = frozenset({"inserted_into_table", "inlined_insert"})
DELETE_KINDS = frozenset({"deleted_from_table", "inlined_delete"})
ALTER_KINDS = frozenset({"altered_table", "dropped_table"})

# One item of ``changes_made``: ``kind:target``, the target a number (a table id) or quoted
# names, which may hold commas (``created_table:"main"."a,b"``).
_ITEM = re.compile(r'([a-z_]+):((?:"(?:[^"]|"")*"\.?)+|[^,]*)(?:,|$)')


@dataclass(frozen=True)
class WindowSpec:
    """What the runner needs to pin one view's window: the session variable to set, the view
    (whose catalog's snapshot log holds its cursors), the catalogs read (in the order of the
    ``end_<k>`` fields) and the sources (in the order of their ``<field>_<i>`` fields)."""

    variable: str
    view: str
    catalogs: list[str]
    sources: list[str]

    def statement(self) -> str:
        """The plan's statement: the directive the runner pins the window for."""
        return f"{DIRECTIVE}{json.dumps(asdict(self))}"

    @classmethod
    def parse(cls, statement: str) -> WindowSpec | None:
        """The spec of a pin-window statement; ``None`` for any other statement."""
        if not statement.startswith(DIRECTIVE):
            return None
        return cls(**json.loads(statement[len(DIRECTIVE) :]))


@dataclass
class Window:
    """A pinned window: the fields of the window variable, and per source the kinds of change
    (``inserted_into_table``, ``inlined_delete``, ...) its window holds and its bounds."""

    variable: str
    values: dict[str, Any]
    kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    sources: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # id, cursor, end
    snapshots: dict[str, frozenset[int]] = field(default_factory=dict)  # that changed a source


def changed_tables(changes_made: str | None) -> list[tuple[str, str]]:
    """The ``(kind, target)`` items of a snapshot's ``changes_made``.

    >>> changed_tables('created_table:"main"."a,b",inserted_into_table:12')
    [('created_table', '"main"."a,b"'), ('inserted_into_table', '12')]
    """
    items, at, text = [], 0, changes_made or ""
    while at < len(text):
        match = _ITEM.match(text, at)
        if match is None or match.end() == at:  # a shape DuckLake does not write
            raise ValueError(f"unreadable DuckLake changes_made: {text!r}")
        items.append((match.group(1), match.group(2)))
        at = match.end()
    return items


def window_from(
    spec: WindowSpec,
    cursors: list[tuple[str, int, int]],
    ends: dict[int, int],
    log: dict[int, list[tuple[int, str | None]]],
) -> Window:
    """The window; or :class:`RebuildRequired`.

    ``cursors``: the view's recorded cursors ``(source, table id, snapshot)``; ``ends``: each
    catalog's end snapshot (by its index in ``spec.catalogs``); ``log``: per catalog, the
    snapshots ``(snapshot_id, changes_made)`` from its oldest cursor to its end.

    The rules: there must be exactly one cursor per source, and each cursor's snapshot must
    still be in the log (else it was expired). A source *changed* when a snapshot in
    ``(cursor, end]`` lists its table id under any kind of change; it was *altered* (a
    rebuild is required) under ``altered_table`` / ``dropped_table``; it has *inserts* unless
    every such kind only removes rows, *deletes* unless every one only adds.
    """
    cursors = [c for c in cursors if c[0] in spec.sources]
    recorded = {source: (table_id, snapshot) for source, table_id, snapshot in cursors}
    if spec.sources and not cursors:
        raise RebuildRequired("no cursors recorded (the view was never built)")
    if len(cursors) != len(spec.sources) or len(recorded) != len(spec.sources):
        raise RebuildRequired("no single cursor for every source (initialize the view)")
    window: dict[str, Any] = {f"end_{k}": ends[k] for k in range(len(spec.catalogs))}
    window["changed"] = False
    all_kinds: dict[str, frozenset[str]] = {}
    bounds: dict[str, tuple[int, int, int]] = {}
    snapshots_of: dict[str, frozenset[int]] = {}
    expired, altered = [], []
    for i, source in enumerate(spec.sources):
        table_id, cursor = recorded[source]
        k = spec.catalogs.index(source.split(".", 1)[0])
        snapshots = log.get(k, [])
        if all(snapshot_id != cursor for snapshot_id, _ in snapshots):
            expired.append(source)
        kinds = {
            kind
            for snapshot_id, changes_made in snapshots
            if cursor < snapshot_id <= ends[k]
            for kind, target in changed_tables(changes_made)
            if target == str(table_id)
        }
        snapshots_of[source] = frozenset(
            snapshot_id
            for snapshot_id, changes_made in snapshots
            if cursor < snapshot_id <= ends[k]
            and any(target == str(table_id) for _, target in changed_tables(changes_made))
        )
        if kinds & ALTER_KINDS:
            altered.append(source)
        all_kinds[source] = frozenset(kinds)
        bounds[source] = (table_id, cursor, ends[k])
        window |= {
            f"cursor_{i}": cursor,
            f"table_id_{i}": table_id,
            f"changed_{i}": bool(kinds),
            f"inserts_{i}": bool(kinds - DELETE_KINDS),
            f"deletes_{i}": bool(kinds - INSERT_KINDS),
        }
        window["changed"] = window["changed"] or bool(kinds)
    if expired:
        raise RebuildRequired(f"cursor snapshot of {min(expired)} was expired")
    if altered:
        raise RebuildRequired(f"source {min(altered)} was altered or recreated")
    return Window(spec.variable, window, all_kinds, bounds, snapshots_of)


def read(con: Any, statement: str, *, pin: bool = False) -> Window:
    """The window of a pin-window ``statement`` on ``con``; with ``pin``, also set its
    variable (inside the refresh's transaction, before the statements that use it)."""
    spec = WindowSpec.parse(statement)
    if spec is None:
        raise ValueError("not a pin-window statement")
    view_catalog = spec.view.split(".", 1)[0]
    current = {c: f"(SELECT id FROM ducklake_current_snapshot({_lit(c)}))" for c in spec.catalogs}
    # 1. each catalog's end, and the view's newest cursors no newer than its catalog's end
    newest = ducklake_cursors.newest_query(view_catalog, spec.view, until=current[view_catalog])
    first = " UNION ALL ".join(
        [
            *(
                f"SELECT {k} AS catalog, CAST({current[c]} AS BIGINT) AS snapshot_id, NULL AS info"
                for k, c in enumerate(spec.catalogs)
            ),
            f"SELECT NULL, * FROM ({newest})",
        ]
    )
    ends: dict[int, int] = {}
    cursors: list[tuple[str, int, int]] = []
    for catalog, snapshot_id, info in con.execute(first).fetchall():
        if catalog is None:
            cursors = ducklake_cursors.parse(info)
        else:
            ends[catalog] = int(snapshot_id)
    # 2. each catalog's snapshot log from its oldest cursor to its end
    since = dict(ends)
    for source, _, snapshot in cursors:
        if source in spec.sources:
            k = spec.catalogs.index(source.split(".", 1)[0])
            since[k] = min(since[k], snapshot)
    second = " UNION ALL ".join(
        f"SELECT {k} AS catalog, s.snapshot_id, c.changes_made"
        f" FROM {meta}.ducklake_snapshot AS s"
        f" LEFT JOIN {meta}.ducklake_snapshot_changes AS c USING (snapshot_id)"
        f" WHERE s.snapshot_id >= {since[k]} AND s.snapshot_id <= {ends[k]}"
        for k, meta in enumerate(map(ducklake_cursors.metadata_database, spec.catalogs))
    )
    log: dict[int, list[tuple[int, str | None]]] = {k: [] for k in ends}
    for catalog, snapshot_id, changes_made in con.execute(second).fetchall():
        log[catalog].append((int(snapshot_id), changes_made))
    window = window_from(spec, cursors, ends, log)
    if pin:
        con.execute(set_window(spec.variable, window.values))
    return window


def set_window(variable: str, window: dict[str, Any]) -> str:
    """``SET VARIABLE`` to the window as a literal struct (integers as BIGINT)."""
    fields = ", ".join(f"{name} := {_value(value)}" for name, value in window.items())
    return f"SET VARIABLE {variable} = struct_pack({fields})"


def statement_of(statements: list[str]) -> str:
    """The pin-window statement among a plan's ``maintain`` statements."""
    return next(s for s in statements if s.startswith(DIRECTIVE))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"CAST({int(value)} AS BIGINT)"


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
