"""Expire a DuckLake catalog's snapshots that no maintained view needs: ``python -m duckstream
expire <lake>``.

Every commit to a DuckLake adds a snapshot, and its snapshot log only grows: a view refreshed
every five minutes adds ~300 snapshots a day, and a refresh's window read (the snapshot log
since its cursors) and DuckLake's own catalog reads slow down a little as it grows (issue
"Performance", item 6: a one-row refresh 31 -> 34-42 ms CPU after a few thousand commits).
``ducklake_expire_snapshots`` removes old snapshots, but a maintained view reads its sources
*at its cursors* (old states, ``AT (VERSION => cursor)``) and *since* them (the change feed):
expiring a cursor's snapshot forces the next refresh to rebuild. So :func:`expire` keeps, per
catalog, every snapshot from the oldest of

- every cursor, into this catalog, of every maintained view of every attached DuckLake (a
  view may live in one catalog and read another: attach them all before expiring);
- the newest commit of each view it holds (where its cursors are recorded);

on, and with ``older_than`` also those committed after it (time travel a user wants to keep).
The current snapshot always stays. A refresh whose sources did not change commits its cursors
once they are :data:`~duckstream.engines.ducklake.window.ADVANCE_IDLE_CURSORS` snapshots
behind, so a view over tables that rarely change does not hold expiry back for long.

Expiring drops the older commits of each view too: ``status`` then lists fewer refreshes, and
``auto`` has fewer measured times to decide on (it measures a path again when it has none). A
view whose cursors are committed after the bound was read (one being built meanwhile by
another process) may find its cursor expired: its next refresh then rebuilds and says why (the
window check), never a wrong table. ``cleanup=True`` then deletes the data files only expired
snapshots used (``ducklake_cleanup_old_files``).

>>> import tempfile
>>> from duckstream.lake import connect_ducklake
>>> con = connect_ducklake(tempfile.mkdtemp(), alias="lake")
>>> _ = con.execute("CREATE TABLE lake.t AS SELECT 0 AS k")
>>> for k in range(2):
...     _ = con.execute(f"INSERT INTO lake.t SELECT {k}")
>>> done = expire(con, "lake")
>>> done.expired, done.kept_from, done.needed_by
([0, 1, 2], 3, 'the current snapshot')
"""

from __future__ import annotations

import dataclasses
import datetime

from duckstream.connection import Connection
from duckstream.connection import literal as _lit
from duckstream.engines.ducklake.cursors import AUTHOR, MESSAGE_PREFIX, metadata_database, parse
from duckstream.engines.ducklake.status import existing_tables


@dataclasses.dataclass(frozen=True)
class Expiry:
    """What :func:`expire` did (or, dry, would do) to ``catalog``: the snapshots it expired,
    the oldest one it kept for maintained views, and what needs that one."""

    catalog: str
    expired: list[int]
    kept_from: int
    needed_by: str

    def text(self, dry_run: bool = False) -> str:
        """One line for a person."""
        if not self.expired:
            kept = f"snapshot {self.kept_from} on: {self.needed_by}"
            return f"{self.catalog}: nothing to expire ({kept})"
        verb = "would expire" if dry_run else "expired"
        return (
            f"{self.catalog}: {verb} {len(self.expired)} snapshots ({self.expired[0]} to"
            f" {self.expired[-1]}); kept {self.kept_from} on, needed by {self.needed_by}"
        )


def _ducklakes(con: Connection) -> list[str]:
    rows = con.execute(
        "SELECT database_name FROM duckdb_databases() WHERE type = 'ducklake' ORDER BY 1"
    ).fetchall()
    return [str(row[0]) for row in rows]


def needed_snapshots(con: Connection, catalog: str) -> dict[str, int]:
    """The snapshots of DuckLake ``catalog`` that maintained views still need, by what needs
    them: each view's cursors into it (the views of every attached DuckLake that still
    exist), and the newest commit of each view it holds."""
    needed: dict[str, int] = {}
    for home in _ducklakes(con):
        meta = metadata_database(home)
        rows = con.execute(
            "SELECT commit_message, max(snapshot_id),"
            " arg_max(commit_extra_info, snapshot_id)"
            f" FROM {meta}.ducklake_snapshot_changes WHERE author = {_lit(AUTHOR)}"
            f" AND starts_with(commit_message, {_lit(MESSAGE_PREFIX)}) GROUP BY commit_message"
            " ORDER BY commit_message"
        ).fetchall()
        existing = existing_tables(con, home)
        for message, snapshot, info in rows:
            view = str(message)[len(MESSAGE_PREFIX) :]
            if view.lower() not in existing:
                continue  # dropped: nothing reads its cursors
            if home.lower() == catalog.lower():
                needed[f"the commit of {view}'s cursors"] = int(snapshot)
            for source, _, cursor in parse(info):
                if source.split(".", 1)[0].lower() == catalog.lower():
                    needed[f"{view}'s cursor of {source}"] = cursor
    return needed


def expire(
    con: Connection,
    catalog: str,
    older_than: datetime.datetime | None = None,
    *,
    dry_run: bool = False,
    cleanup: bool = False,
) -> Expiry:
    """Expire the snapshots of DuckLake ``catalog`` older than every snapshot a maintained view
    needs (:func:`needed_snapshots`; the current one always stays), and with ``older_than``
    only those committed before it. ``dry_run``: say what, expire nothing. ``cleanup``: then
    delete the files only the expired snapshots used."""
    current = con.execute("SELECT id FROM ducklake_current_snapshot(?)", [catalog]).fetchone()
    assert current is not None
    needed = needed_snapshots(con, catalog)
    needed_by, kept_from = min(
        [(reason, snapshot) for reason, snapshot in needed.items()]
        + [("the current snapshot", int(current[0]))],
        key=lambda found: (found[1], found[0]),
    )
    time_bound = "" if older_than is None else " AND snapshot_time < ?"
    expired = [
        int(row[0])
        for row in con.execute(
            f"SELECT snapshot_id FROM ducklake_snapshots({_lit(catalog)})"
            f" WHERE snapshot_id < {int(kept_from)}{time_bound} ORDER BY snapshot_id",
            [] if older_than is None else [older_than],
        ).fetchall()
    ]
    if expired and not dry_run:
        versions = ", ".join(str(v) for v in expired)
        con.execute(f"CALL ducklake_expire_snapshots({_lit(catalog)}, versions => [{versions}])")
        if cleanup:
            con.execute(f"CALL ducklake_cleanup_old_files({_lit(catalog)}, cleanup_all => true)")
    return Expiry(catalog, expired, kept_from, needed_by)
