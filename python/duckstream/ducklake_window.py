"""Pin a DuckLake refresh window: read the snapshot lists once, check and decide in Python.

A refresh's window is, per catalog, the end snapshot it applies up to and, per source, the
cursor it starts from, the source's table id and whether (and how) the source changed in
between. Everything comes from the snapshot lists of the catalogs the view touches, which
also hold the view's cursors (:mod:`duckstream.ducklake_cursors`): one plain query.

Checking those rows in SQL took one statement too, but DuckDB spent ~20 ms *planning* it
(dozens of filtered aggregates, lambdas over the change maps) to run ~4 ms of work, on every
refresh. Here the plan's statement is the plain read, marked by a directive; the runner
(:func:`duckstream.runtime.run_statements`) hands its rows to :func:`window_from` and sets
the window variable to the literal result::

    -- duckstream: pin window {"variable": ..., "view": ..., "catalogs": [...], "sources": [...]}
    SELECT 0 AS catalog, snapshot_id, changes, author, commit_message, commit_extra_info
    FROM ducklake_snapshots('lake')

To run a plan by hand: run that query, apply :func:`window_from`'s rules to its rows (they
are spelled out in its docstring) and ``SET VARIABLE <variable> = <the struct>``.

>>> spec = WindowSpec("v", "lake.main.mv", ["lake"], ["lake.main.t"])
>>> rows = [
...     (0, 1, {"tables_created": ["main.t"]}, None, None, None),
...     (0, 2, {"tables_inserted_into": ["5"]}, "duckstream", "cursors of lake.main.mv",
...      '{"cursors": [{"source": "lake.main.t", "table_id": 5, "snapshot": 1}]}'),
...     (0, 3, {"tables_inserted_into": ["5"]}, None, None, None),
... ]
>>> window = window_from(spec, rows)
>>> window.sources["lake.main.t"], window.values["changed_0"], window.kinds["lake.main.t"]
((5, 1, 3), True, frozenset({'tables_inserted_into'}))
>>> window.values["inserts_0"], window.values["deletes_0"]
(True, False)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from duckstream import ducklake_cursors
from duckstream.errors import RebuildRequired

DIRECTIVE = "-- duckstream: pin window "

# Change kinds of DuckLake's snapshot log that only add rows, or only remove rows: a window
# with nothing else for a source skips reading the other half of its change feed (each
# ``ducklake_table_insertions/deletions`` call costs ~5 ms).
INSERT_KINDS = frozenset({"tables_inserted_into", "inlined_insert"})
DELETE_KINDS = frozenset({"tables_deleted_from", "inlined_delete"})
ALTER_KINDS = frozenset({"tables_altered", "tables_dropped"})


@dataclass(frozen=True)
class WindowSpec:
    """What the runner needs to pin one view's window: the session variable to set, the view
    (whose catalog's snapshot list holds its cursors), the catalogs read (in the order of the
    ``end_<k>`` fields) and the sources (in the order of their ``<field>_<i>`` fields)."""

    variable: str
    view: str
    catalogs: list[str]
    sources: list[str]

    def statement(self) -> str:
        """The plan's statement: the directive, then the one read of the snapshot lists."""
        reads = " UNION ALL ".join(
            f"SELECT {k} AS catalog, snapshot_id, changes, author, commit_message,"
            f" commit_extra_info FROM ducklake_snapshots({_lit(c)})"
            for k, c in enumerate(self.catalogs)
        )
        return f"{DIRECTIVE}{json.dumps(asdict(self))}\n{reads}"

    @classmethod
    def parse(cls, statement: str) -> WindowSpec | None:
        """The spec of a pin-window statement; ``None`` for any other statement."""
        if not statement.startswith(DIRECTIVE):
            return None
        return cls(**json.loads(statement[len(DIRECTIVE) :].split("\n", 1)[0]))


@dataclass
class Window:
    """A pinned window: the fields of the window variable, and per source the kinds of change
    (``tables_inserted_into``, ``inlined_delete``, ...) its window holds."""

    variable: str
    values: dict[str, Any]
    kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    sources: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # id, cursor, end


def window_from(spec: WindowSpec, rows: list[tuple]) -> Window:
    """The window, from the rows of ``spec``'s query; or :class:`RebuildRequired`.

    The rules: each catalog's end is its newest snapshot. The view's cursors are the extra
    info of the newest snapshot of the view's catalog whose author is ``duckstream`` and
    whose message is ``cursors of <view>``; there must be exactly one per source, and each
    cursor's snapshot must still exist (else it was expired). A source *changed* when a
    snapshot in ``(cursor, end]`` lists its table id under any kind of change; it was
    *altered* (a rebuild is required) under ``tables_altered`` / ``tables_dropped``; it has
    *inserts* unless every such kind only removes rows, *deletes* unless every one only adds.
    """
    snapshots: dict[int, dict[int, dict]] = {k: {} for k in range(len(spec.catalogs))}
    for catalog, snapshot_id, changes, *_ in rows:
        snapshots[catalog][snapshot_id] = changes or {}
    ends = {k: max(ids, default=0) for k, ids in snapshots.items()}
    view_catalog = spec.catalogs.index(spec.view.split(".", 1)[0])
    commits = [r[1:2] + r[3:] for r in rows if r[0] == view_catalog]  # id, author, message, info
    cursors = [c for c in ducklake_cursors.newest(commits, spec.view) if c[0] in spec.sources]
    recorded = {source: (table_id, snapshot) for source, table_id, snapshot in cursors}
    if spec.sources and not cursors:
        raise RebuildRequired("no cursors recorded (the view was never built)")
    if len(cursors) != len(spec.sources) or len(recorded) != len(spec.sources):
        raise RebuildRequired("no single cursor for every source (initialize the view)")
    window: dict[str, Any] = {f"end_{k}": ends[k] for k in range(len(spec.catalogs))}
    window["changed"] = False
    all_kinds: dict[str, frozenset[str]] = {}
    bounds: dict[str, tuple[int, int, int]] = {}
    expired, altered = [], []
    for i, source in enumerate(spec.sources):
        table_id, cursor = recorded[source]
        k = spec.catalogs.index(source.split(".", 1)[0])
        if cursor not in snapshots[k]:
            expired.append(source)
        kinds = {
            kind
            for snapshot_id, changes in snapshots[k].items()
            if cursor < snapshot_id <= ends[k]
            for kind, tables in changes.items()
            if str(table_id) in (tables or [])
        }
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
    return Window(spec.variable, window, all_kinds, bounds)


def set_window(variable: str, window: dict[str, Any]) -> str:
    """``SET VARIABLE`` to the window as a literal struct (integers as BIGINT)."""
    fields = ", ".join(f"{name} := {_value(value)}" for name, value in window.items())
    return f"SET VARIABLE {variable} = struct_pack({fields})"


def read(con: Any, statement: str, *, pin: bool = False) -> Window:
    """The window of a pin-window ``statement`` on ``con``; with ``pin``, also set its
    variable (inside the refresh's transaction, before the statements that use it)."""
    spec = WindowSpec.parse(statement)
    if spec is None:
        raise ValueError("not a pin-window statement")
    window = window_from(spec, con.execute(statement).fetchall())
    if pin:
        con.execute(set_window(spec.variable, window.values))
    return window


def statement_of(statements: list[str]) -> str:
    """The pin-window statement among a plan's ``maintain`` statements."""
    return next(s for s in statements if s.startswith(DIRECTIVE))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"CAST({int(value)} AS BIGINT)"


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
