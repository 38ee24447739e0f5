"""Expire the Iceberg snapshots that no maintained view needs: ``python -m duckstream expire
--engine spark``, or :func:`expire` with your own session.

A view's cursors are snapshot ids of its sources (properties of the view's own snapshots:
:mod:`duckstream.engines.iceberg.status`); a refresh reads each source's changes after its
cursor and, for deletions and updates, the source at the cursor. Iceberg's own
``expire_snapshots`` removes snapshots older than a time (five days by default,
``history.expire.max-snapshot-age-ms``): a view not refreshed for longer loses its cursor and
rebuilds at its next refresh. :func:`expire` bounds the age per table by what the views read:
each source of a maintained view keeps every snapshot from the oldest of its cursors on (by
commit time: the oldest commit time among the cursor snapshots and the snapshots after them
in the table's history), and with ``older_than`` also those committed after it. Only the
maintained views of ``namespaces`` and the tables they read are touched: other tables are the
user's (attach every namespace whose views read a table, or a view elsewhere may lose its
cursor and rebuild, never read wrong rows). The current snapshot of a table always stays;
Iceberg deletes the files only expired snapshots used.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.engines.iceberg.status import views_status
from duckstream.engines.iceberg.window import java_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclasses.dataclass(frozen=True)
class TableExpiry:
    """What :func:`expire` did (or, dry, would do) to one table: the snapshots it expired and
    the commit time (epoch milliseconds) it kept every snapshot from, and why."""

    table: str
    expired: list[int]
    kept_from_ms: int | None  # None: nothing bounds it (no view reads it, no older_than)
    needed_by: str

    def text(self, dry_run: bool = False) -> str:
        """One line for a person."""
        verb = "would expire" if dry_run else "expired"
        if not self.expired:
            return f"{self.table}: nothing to expire ({self.needed_by})"
        return f"{self.table}: {verb} {len(self.expired)} snapshots; kept {self.needed_by}"


def _lineage(table: Any) -> list[tuple[int, int]]:
    """``(snapshot id, commit time ms)`` of the table's current snapshot and its ancestors,
    newest first, as far as they are kept."""
    found, current = [], table.currentSnapshot()
    while current is not None:
        found.append((int(current.snapshotId()), int(current.timestampMillis())))
        parent = current.parentId()
        current = None if parent is None else table.snapshot(parent)
    return found


def expire(
    spark: SparkSession,
    catalog: str,
    namespaces: Sequence[str],
    older_than: datetime.datetime | None = None,
    *,
    dry_run: bool = False,
) -> list[TableExpiry]:
    """Expire, per maintained view of ``catalog``'s ``namespaces`` and per table they read, the
    snapshots committed before the oldest one a view needs (and before ``older_than``)."""
    views = [s for namespace in namespaces for s in views_status(spark, catalog, namespace)]
    cursors: dict[str, dict[int, str]] = {s.view: {} for s in views}  # table -> cursor -> view
    for status in views:
        for source, cursor in status.cursors.items():
            cursors.setdefault(source, {})[cursor] = status.view
    limit = None if older_than is None else int(older_than.timestamp() * 1000)
    done = []
    for name in sorted(cursors):
        table = java_table(spark, name)
        lineage = _lineage(table)
        bound, needed_by = limit, "the snapshots committed after older_than"
        ids = [snapshot for snapshot, _ in lineage]
        read = [ids.index(cursor) for cursor in cursors[name] if cursor in ids]
        if read:  # from the oldest cursor on, by commit time
            oldest = max(read)
            kept = min(at for _, at in lineage[: oldest + 1])
            view = cursors[name][ids[oldest]]
            if bound is None or kept < bound:
                bound, needed_by = kept, f"snapshot {ids[oldest]} on: {view}'s cursor"
        if bound is None:
            done.append(TableExpiry(name, [], None, "no view reads it"))
            continue
        current = ids[0] if ids else None
        expired = sorted(
            int(s.snapshotId())
            for s in table.snapshots()
            if int(s.timestampMillis()) < bound and int(s.snapshotId()) != current
        )
        if expired and not dry_run:
            table.expireSnapshots().expireOlderThan(bound).retainLast(1).commit()
            # Spark's catalog may hold another instance of the table than this one
            spark.sql(f"REFRESH TABLE {exp.to_table(name).sql(DIALECT)}")
        done.append(TableExpiry(name, expired, bound, needed_by))
    return done
