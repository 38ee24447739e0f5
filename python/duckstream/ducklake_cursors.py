"""Where a DuckLake view's cursors live: in the snapshot its last refresh committed.

A refresh (or a build) of a view sets its commit's author to ``duckstream``, its message to
``cursors of <catalog.schema.view>`` and its extra info to the new cursors as JSON, so the
cursors are written by the very commit that changes the view: atomic with it by construction.
Reading them is a query over the catalog's snapshot list, which DuckLake keeps in its metadata
database: no table scan. A cursors *table* cost every refresh one more DuckLake table read and
an UPDATE (~10-15 ms each, and a cold read loads a catalog version, ~20 ms).

DuckLake only makes a snapshot when something changed, so each refresh that advances the
cursors also appends their rows to the view's cursors table: an append-only log that
duckstream never reads (an INSERT needs no read), which guarantees the commit and lets people
see the history (``SELECT * FROM _ivm_cursors``; old rows may be deleted at will).

>>> message("lake.main.revenue")
'cursors of lake.main.revenue'
>>> record("lake", "lake.main.v", [("lake.main.t", "3", "17")])[:80]
"CALL ducklake_set_commit_message('lake', 'duckstream', 'cursors of lake.main.v',"
"""

from __future__ import annotations

import json
from typing import Any, Protocol

AUTHOR = "duckstream"


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def message(view: str) -> str:
    """The commit message that marks a commit holding ``view``'s cursors."""
    return f"cursors of {view}"


def record(catalog: str, view: str, cursors: list[tuple[str, str, str]]) -> str:
    """A statement, inside the refresh's transaction, making its commit carry the cursors
    ``(source, table id SQL, snapshot SQL)`` of ``view`` (a catalog of DuckLake ``catalog``).
    """
    items = ", ".join(
        f"struct_pack(source := {_lit(source)}, table_id := CAST({table_id} AS BIGINT),"
        f" snapshot := CAST({snapshot} AS BIGINT))"
        for source, table_id, snapshot in cursors
    )
    info = f"to_json(struct_pack(cursors := [{items}]))::VARCHAR"
    return (
        f"CALL ducklake_set_commit_message({_lit(catalog)}, {_lit(AUTHOR)},"
        f" {_lit(message(view))}, extra_info => {info})"
    )


def newest(snapshots: list[tuple], view: str) -> list[tuple[str, int, int]]:
    """``view``'s cursors ``(source, table id, snapshot)`` from snapshot rows ``(snapshot_id,
    author, commit_message, commit_extra_info)``: those of the newest that recorded them.

    >>> info = '{"cursors": [{"source": "l.m.t", "table_id": 5, "snapshot": 1}]}'
    >>> newest([(2, "duckstream", "cursors of l.m.v", info), (3, None, None, None)], "l.m.v")
    [('l.m.t', 5, 1)]
    """
    marked = [r for r in snapshots if r[1] == AUTHOR and r[2] == message(view)]
    if not marked:
        return []
    info = json.loads(max(marked, key=lambda r: r[0])[3])
    return [(c["source"], int(c["table_id"]), int(c["snapshot"])) for c in info["cursors"]]


def read(con: Connection, catalog: str, view: str) -> dict[str, tuple[int, int]] | None:
    """``view``'s cursors, source -> (table id, snapshot); ``None`` when none were recorded."""
    meta = '"' + f"__ducklake_metadata_{catalog}".replace('"', '""') + '"'
    rows = con.execute(
        "SELECT snapshot_id, author, commit_message, commit_extra_info"
        f" FROM {meta}.ducklake_snapshot_changes WHERE author = ? AND commit_message = ?",
        [AUTHOR, message(view)],
    ).fetchall()
    cursors = newest(rows, view)
    return {source: (table_id, snapshot) for source, table_id, snapshot in cursors} or None
