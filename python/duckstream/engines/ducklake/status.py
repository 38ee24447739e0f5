"""What a DuckLake catalog's maintained views look like now: ``python -m duckstream status``.

Every refresh or build of a view commits its cursors in the commit that changes the view
(:mod:`duckstream.engines.ducklake.cursors`), with its history entry
(:mod:`duckstream.history`), so DuckLake's own snapshot log is the history: per view, its
newest commits give when it was refreshed, the path each refresh took, why, its rows in and
out and how long it ran; its cursors against the snapshots committed since give how far
behind it is (the snapshots that changed one of its sources after its cursor) and since when.
Nothing is read but the catalog's metadata tables: no data file, no view table.

>>> pending_tables("inserted_into_table:3,deleted_from_table:7,created_table:\\"main\\".\\"x,y\\"")
{3, 7}
"""

from __future__ import annotations

import json
import re

from duckstream.connection import Connection
from duckstream.connection import literal as _lit
from duckstream.engines.ducklake.cursors import AUTHOR, MESSAGE_PREFIX, metadata_database, parse
from duckstream.history import Entry
from duckstream.status import Refresh, ViewStatus, status_text

# Changes of a table's rows or shape in ``ducklake_snapshot_changes.changes_made``: what a view
# reading the table has to catch up with (a rebuild, for a changed shape).
_TABLE_CHANGE = re.compile(
    r"\b(?:inserted_into_table|deleted_from_table|inlined_insert|inlined_delete"
    r"|altered_table|dropped_table):(\d+)"
)


def pending_tables(changes_made: str) -> set[int]:
    """The ids of the tables whose rows or shape a snapshot's ``changes_made`` changed."""
    return {int(m) for m in _TABLE_CHANGE.findall(changes_made or "")}


def existing_tables(con: Connection, catalog: str) -> set[str]:
    """The full names (lower case) of the tables DuckLake ``catalog`` holds now: a view's
    commits outlive its table (dropped, its cursors matter to nobody)."""
    return {
        f"{catalog}.{schema}.{name}".lower()
        for schema, name in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?",
            [catalog],
        ).fetchall()
    }


def views_status(con: Connection, catalog: str, recent: int = 5) -> list[ViewStatus]:
    """The maintained views of DuckLake ``catalog`` that still exist, by name, each with its
    ``recent`` newest refreshes."""
    meta = metadata_database(catalog)
    rows = con.execute(
        f"SELECT c.snapshot_id, s.snapshot_time, c.commit_message, c.commit_extra_info"
        f" FROM {meta}.ducklake_snapshot_changes c JOIN {meta}.ducklake_snapshot s"
        f" USING (snapshot_id)"
        f" WHERE c.author = {_lit(AUTHOR)}"
        f" AND starts_with(c.commit_message, {_lit(MESSAGE_PREFIX)})"
        f" ORDER BY c.snapshot_id DESC"
    ).fetchall()
    existing = existing_tables(con, catalog)
    views: dict[str, ViewStatus] = {}
    table_ids: dict[str, dict[int, int]] = {}  # view -> source table id -> cursor
    for snapshot, at, message, info in rows:
        view = message[len(MESSAGE_PREFIX) :]
        if view.lower() not in existing:
            continue
        if view not in views:
            cursors = parse(info)
            views[view] = ViewStatus(view, {source: snap for source, _, snap in cursors})
            table_ids[view] = {table_id: snap for _, table_id, snap in cursors}
        status = views[view]
        if len(status.refreshes) < recent:
            status.refreshes.append(Refresh(int(snapshot), at, _entry(info)))
    if not views:
        return []
    oldest = min(min(ids.values(), default=0) for ids in table_ids.values())
    later = con.execute(
        f"SELECT c.snapshot_id, s.snapshot_time, c.changes_made"
        f" FROM {meta}.ducklake_snapshot_changes c JOIN {meta}.ducklake_snapshot s"
        f" USING (snapshot_id) WHERE c.snapshot_id > ? ORDER BY c.snapshot_id",
        [oldest],
    ).fetchall()
    for snapshot, at, changes in later:
        changed = pending_tables(changes)
        for view, ids in table_ids.items():
            if any(table in changed and snapshot > cursor for table, cursor in ids.items()):
                status = views[view]
                status.pending += 1
                status.behind_since = status.behind_since or at
    return sorted(views.values(), key=lambda s: s.view)


def _entry(info: str) -> Entry | None:
    """The history entry a commit's extra info holds (None: none, as from plain SQL)."""
    try:
        found = json.loads(info).get("measured")
        return Entry.from_dict(found) if isinstance(found, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


__all__ = ["Refresh", "ViewStatus", "pending_tables", "status_text", "views_status"]
