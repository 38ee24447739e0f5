"""What a DuckLake catalog's maintained views look like now: ``python -m duckstream status``.

Every refresh or build of a view commits its cursors in the commit that changes the view
(:mod:`duckstream.engines.ducklake.cursors`), so DuckLake's own snapshot log is the history:
per view, its newest commits give when it was refreshed, the path each refresh took and how
long it ran; its cursors against the snapshots committed since give how far behind it is (the
snapshots that changed one of its sources after its cursor) and since when. Nothing is read
but the catalog's metadata tables: no data file, no view table.

>>> pending_tables("inserted_into_table:3,deleted_from_table:7,created_table:\\"main\\".\\"x,y\\"")
{3, 7}
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field

from duckstream.connection import Connection
from duckstream.connection import literal as _lit
from duckstream.engines.ducklake.cursors import AUTHOR, measurement, metadata_database, parse
from duckstream.refresh import Measured

_PREFIX = "cursors of "
# Changes of a table's rows or shape in ``ducklake_snapshot_changes.changes_made``: what a view
# reading the table has to catch up with (a rebuild, for a changed shape).
_TABLE_CHANGE = re.compile(
    r"\b(?:inserted_into_table|deleted_from_table|inlined_insert|inlined_delete"
    r"|altered_table|dropped_table):(\d+)"
)


def pending_tables(changes_made: str) -> set[int]:
    """The ids of the tables whose rows or shape a snapshot's ``changes_made`` changed."""
    return {int(m) for m in _TABLE_CHANGE.findall(changes_made or "")}


@dataclass(frozen=True)
class Refresh:
    """One commit that recorded a view's cursors: a refresh, a rebuild or the first build."""

    snapshot: int
    at: datetime.datetime
    measured: Measured | None  # the path and its time (None: run as plain SQL)


@dataclass
class ViewStatus:
    """One maintained view: its cursors, how far behind its sources it is, its refreshes."""

    view: str  # catalog.schema.name
    cursors: dict[str, int]  # source -> the snapshot the view has caught up to
    refreshes: list[Refresh] = field(default_factory=list)  # newest first
    pending: int = 0  # snapshots after the cursors that changed one of its sources
    behind_since: datetime.datetime | None = None  # the oldest of them (None: up to date)

    @property
    def last(self) -> Refresh:
        return self.refreshes[0]


def views_status(con: Connection, catalog: str, recent: int = 5) -> list[ViewStatus]:
    """The maintained views of DuckLake ``catalog`` that still exist, by name, each with its
    ``recent`` newest refreshes."""
    meta = metadata_database(catalog)
    rows = con.execute(
        f"SELECT c.snapshot_id, s.snapshot_time, c.commit_message, c.commit_extra_info"
        f" FROM {meta}.ducklake_snapshot_changes c JOIN {meta}.ducklake_snapshot s"
        f" USING (snapshot_id)"
        f" WHERE c.author = {_lit(AUTHOR)} AND starts_with(c.commit_message, {_lit(_PREFIX)})"
        f" ORDER BY c.snapshot_id DESC"
    ).fetchall()
    existing = {
        f"{catalog}.{schema}.{name}".lower()
        for schema, name in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?",
            [catalog],
        ).fetchall()
    }
    views: dict[str, ViewStatus] = {}
    table_ids: dict[str, dict[int, int]] = {}  # view -> source table id -> cursor
    for snapshot, at, message, info in rows:
        view = message[len(_PREFIX) :]
        if view.lower() not in existing:
            continue
        if view not in views:
            cursors = parse(info)
            views[view] = ViewStatus(view, {source: snap for source, _, snap in cursors})
            table_ids[view] = {table_id: snap for _, table_id, snap in cursors}
        status = views[view]
        if len(status.refreshes) < recent:
            status.refreshes.append(Refresh(int(snapshot), at, _measured(info)))
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


def _measured(info: str) -> Measured | None:
    try:
        return measurement(info)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError):
        return None


def status_text(statuses: list[ViewStatus], now: datetime.datetime | None = None) -> str:
    """``statuses`` as a table for a terminal: per view its lag, its last refresh and the
    paths of its recent ones."""
    if not statuses:
        return "no maintained views"
    now = now or datetime.datetime.now(datetime.UTC)
    lines = ["view | behind | last refresh | path | ms | recent paths"]
    for s in statuses:
        behind = (
            "up to date"
            if s.behind_since is None
            else f"{s.pending} snapshots, oldest {_ago(now, s.behind_since)} ago"
        )
        last = s.last
        path = last.measured.path if last.measured else "sql"
        ms = f"{last.measured.ms:.0f}" if last.measured else "-"
        recent = " ".join(r.measured.path if r.measured else "sql" for r in s.refreshes)
        lines.append(
            f"{s.view} | {behind} | {_ago(now, last.at)} ago (snapshot {last.snapshot})"
            f" | {path} | {ms} | {recent}"
        )
    return "\n".join(lines)


def _ago(now: datetime.datetime, then: datetime.datetime) -> str:
    """A duration, coarsely.

    >>> t = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    >>> [_ago(t + datetime.timedelta(seconds=s), t) for s in (5, 300, 7200, 200000)]
    ['5s', '5m', '2h', '2d']
    """
    seconds = max((now - then).total_seconds(), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"
