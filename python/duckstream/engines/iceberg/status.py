"""What an Iceberg namespace's maintained views look like now: ``python -m duckstream status
--engine spark``.

A view's cursors and its history entry (:mod:`duckstream.history`) are snapshot properties of
the commit that changed it (``duckstream.cursor.<source>``, ``duckstream.refresh``), so the
view's own snapshot log is its history: its newest data snapshots (compactions skipped) give
when it was refreshed, the path each refresh took, why, rows in (the entry) and out (Iceberg's
``added-records`` / ``deleted-records``) and how long it ran; each source's snapshots after
its cursor give how far behind the view is, and since when. Only table metadata is read: no
Spark job, no data file.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.engines.iceberg.window import (
    CLOCK_PROPERTY,
    CURSOR_PROPERTY,
    Snapshot,
    java_table,
    read_snapshot,
)
from duckstream.history import ICEBERG_PROPERTY, Entry
from duckstream.status import Refresh, ViewStatus

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def views_status(
    spark: SparkSession, catalog: str, namespace: str, recent: int = 5
) -> list[ViewStatus]:
    """The maintained views of ``catalog.namespace`` (tables whose latest data snapshot holds
    cursors), by name, each with its ``recent`` newest refreshes."""
    from sqlglot import exp

    where = exp.table_(namespace, catalog).sql(DIALECT)  # a two-part namespace name
    statuses = []
    for row in spark.sql(f"SHOW TABLES IN {where}").collect():
        if row["isTemporary"]:
            continue
        name = f"{catalog}.{namespace}.{row['tableName']}"
        found = view_status(spark, name, recent)
        if found is not None:
            statuses.append(found)
    return sorted(statuses, key=lambda s: s.view)


def view_status(spark: SparkSession, view: str, recent: int = 5) -> ViewStatus | None:
    """``view``'s status; None when it is not a maintained view (no cursors)."""
    table = java_table(spark, view)
    refreshes: list[Refresh] = []
    cursors: dict[str, int] | None = None
    for snapshot in _ancestors(spark, table):
        if snapshot.operation == "replace":
            continue  # a compaction: no refresh
        found = _cursors(snapshot)
        if not found and CLOCK_PROPERTY not in snapshot.summary:
            # written outside duckstream (or before it): the history ends here (a view whose
            # only source is the clock has no cursor, but records the clock it read)
            break
        if cursors is None:
            cursors = found
        refreshes.append(Refresh(snapshot.snapshot_id, _at(snapshot), _entry(snapshot)))
        if len(refreshes) >= recent:
            break
    if cursors is None:
        return None
    status = ViewStatus(view, cursors, refreshes)
    for source, cursor in cursors.items():
        for snapshot in _after(spark, source, cursor):
            status.pending += 1
            at = _at(snapshot)
            if status.behind_since is None or at < status.behind_since:
                status.behind_since = at
    return status


def _ancestors(spark: SparkSession, table: Any):
    """``table``'s current snapshot and its ancestors, newest first, as long as kept."""
    current = table.currentSnapshot()
    while current is not None:
        snapshot = read_snapshot(spark, current)
        yield snapshot
        if snapshot.parent_id is None:
            return
        current = table.snapshot(snapshot.parent_id)


def _after(spark: SparkSession, source: str, cursor: int) -> list[Snapshot]:
    """The snapshots of ``source`` after ``cursor`` that changed rows (compactions skipped);
    all that are kept when the cursor is no longer an ancestor (a rebuild is due)."""
    found = []
    for snapshot in _ancestors(spark, java_table(spark, source)):
        if snapshot.snapshot_id == cursor:
            break
        if snapshot.operation != "replace":
            found.append(snapshot)
    return found


def _cursors(snapshot: Snapshot) -> dict[str, int]:
    return {
        key[len(CURSOR_PROPERTY) :]: int(value)
        for key, value in snapshot.summary.items()
        if key.startswith(CURSOR_PROPERTY)
    }


def _entry(snapshot: Snapshot) -> Entry | None:
    """The snapshot's history entry, with Iceberg's own rows out."""
    try:
        entry = Entry.from_dict(json.loads(snapshot.summary[ICEBERG_PROPERTY]))
    except (KeyError, ValueError, TypeError):
        return None
    counts = snapshot.summary
    added, deleted = counts.get("added-records"), counts.get("deleted-records")
    return replace(entry, inserted=int(added or 0), deleted=int(deleted or 0))


def _at(snapshot: Snapshot) -> datetime.datetime:
    return datetime.datetime.fromtimestamp((snapshot.timestamp_ms or 0) / 1000, datetime.UTC)
