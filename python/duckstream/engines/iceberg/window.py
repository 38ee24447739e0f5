"""A Spark refresh's window, pinned from Iceberg's table metadata without a Spark job.

The plan pins the window in SQL (:class:`WindowPin`'s ``query`` and ``check``: a person runs
them). Each of those reads Iceberg metadata tables (``refs``, ``snapshots``, ``history``,
``metadata_log_entries``), and every such read is a Spark job: 0.4-2 s on ``local[2]`` for a
one-row change, more than the rest of the refresh. The runner pins the same window from
the tables' metadata itself (:func:`read_logs`: Iceberg's Java API through py4j, a few
milliseconds per table, no job), once per refresh, and the same read serves ``auto``'s
estimate (:mod:`.estimate`):

* each source's end snapshot is its current one, its cursor the view's
  ``duckstream.cursor.<source>`` snapshot property (as the SQL reads them);
* the window check: the cursor must be an ancestor of the current snapshot and the schema
  must be the one the cursor snapshot was written with; a source with delete files
  (merge-on-read) in the window needs a rebuild too, since Iceberg's changelog refuses them
  (the SQL finds that when the changelog is read);
* a window whose snapshots are all appends (compactions, ``replace``, change no row) is read
  with Iceberg's incremental append scan (:func:`register_appends`): the rows the window's
  snapshots added, read from their new data files alone, where the changelog view plans a
  scan of every snapshot's added and removed files and pairs off carry-over rows.

A source that was never written has no snapshot to pin: before a fill pins its snapshots
(``initialize_cursors``), :func:`give_first_snapshots` commits an empty append to each such
source (metadata only: no data file, no row), which its time travel and change feed then
start from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.errors import DuckstreamError, RebuildRequired

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CURSOR_PROPERTY = "duckstream.cursor."
REBUILD = "duckstream: rebuild required: "
# Snapshot operations the incremental append scan reads completely: it reads ``append``
# snapshots and skips the rest, right for compactions (``replace``: no row changes), wrong for
# ``overwrite`` and ``delete``.
_APPENDS = {"append", "replace"}
FIRST_SNAPSHOT = "duckstream.first-snapshot"


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot: its id, parent, operation and summary (``schema_id``: the schema
    it was written with, when known; ``timestamp_ms``: its commit time)."""

    snapshot_id: int
    parent_id: int | None
    operation: str
    summary: dict[str, str]
    schema_id: int | None = None
    timestamp_ms: int | None = None  # when it was committed

    def count(self, key: str) -> int:
        """A count of the summary (``added-records``, ...); absent means none."""
        return int(self.summary.get(key) or 0)


@dataclass
class TableLog:
    """What a refresh read of an Iceberg table: its current snapshot (``None``: never
    written), snapshots by id (the current one and ancestors, as far as was read) and its
    current schema id."""

    current: int | None
    snapshots: dict[int, Snapshot]
    schema_id: int | None = None

    def since(self, cursor: int) -> list[Snapshot] | None:
        """The snapshots after ``cursor`` up to the current one, newest first; ``None`` when
        ``cursor`` is not an ancestor of the current snapshot (or was expired)."""
        found, at = [], self.current
        while at != cursor:
            snapshot = self.snapshots.get(at) if at is not None else None
            if snapshot is None:
                return None
            found.append(snapshot)
            at = snapshot.parent_id
        return found

    def latest_data_snapshot(self) -> Snapshot | None:
        """The current snapshot, or its latest ancestor that is not a compaction."""
        at = self.current
        while at is not None and at in self.snapshots:
            if self.snapshots[at].operation != "replace":
                return self.snapshots[at]
            at = self.snapshots[at].parent_id
        return None


@dataclass(frozen=True)
class WindowSource:
    """A source as the window pin names it: full name, index in the view, and the temp view
    its changes in the window are read into."""

    table: str
    index: int
    changes_view: str


@dataclass(frozen=True)
class WindowPin:
    """The spec of an Iceberg plan's :class:`~duckstream.plan.PinWindow`: the pin as SQL
    (``query``: one row, its columns the run-time values named ``<prefix><name>``; ``check``:
    fails with ``duckstream: rebuild required: ...``), and what the runner needs to pin the
    same window from metadata (:func:`pin`)."""

    query: str
    check: str
    view: str
    prefix: str
    sources: tuple[WindowSource, ...]

    def __str__(self) -> str:
        return self.query


@dataclass(frozen=True)
class SnapshotPin:
    """The spec of an Iceberg plan's :class:`~duckstream.plan.PinSnapshot` (a fill): the
    run-time values' prefix and the sources (full name, index), each pinned at its current
    snapshot as both end and cursor."""

    prefix: str
    sources: tuple[tuple[str, int], ...]

    def values(self, spark: SparkSession) -> dict[str, str]:
        """The values the plan's SQL pin computes, from metadata; first gives a snapshot to
        each source that has none (:func:`give_first_snapshots`)."""
        tables = [table for table, _ in self.sources]
        give_first_snapshots(spark, tables)
        current = {t: java_table(spark, t).currentSnapshot() for t in dict.fromkeys(tables)}
        values = {}
        for table, index in self.sources:
            snapshot = current[table]
            if snapshot is None:  # dropped and re-created in between
                raise DuckstreamError(f"duckstream: source {table} has no snapshot")
            values[f"{self.prefix}end_{index}"] = values[f"{self.prefix}cursor_{index}"] = str(
                snapshot.snapshotId()
            )
        return values


@dataclass
class Pinned:
    """A window pinned by :func:`pin`: the run-time values, and the changes views of the
    changed sources whose window holds appends only (read by :func:`register_appends`)."""

    values: dict[str, str]
    appends: dict[str, tuple[str, int, int]]  # changes view -> (table, cursor, end)
    unchanged: dict[str, str]  # changes view -> table


def java_table(spark: SparkSession, name: str) -> Any:
    """The Iceberg table ``name`` (``catalog.schema.table``) as Spark's catalog loads it,
    refreshed to its latest metadata."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    quoted = exp.to_table(name).sql(DIALECT)
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, quoted)
    table.refresh()
    return table


def read_snapshot(spark: SparkSession, java_snapshot: Any) -> Snapshot:
    """One snapshot, read in one call (its JSON)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    found = json.loads(jvm.org.apache.iceberg.SnapshotParser.toJson(java_snapshot))
    summary = {str(k): str(v) for k, v in (found.get("summary") or {}).items()}
    operation = summary.pop("operation", "")
    return Snapshot(
        int(found["snapshot-id"]),
        found.get("parent-snapshot-id"),
        operation,
        summary,
        found.get("schema-id"),
        found.get("timestamp-ms"),
    )


def _read_log(spark: SparkSession, name: str, back_to: int | None, *, data: bool) -> TableLog:
    """``name``'s current snapshot and its ancestors back to ``back_to`` (included: its
    schema), or back to the first non-compaction (``data``), or just the current one."""
    table = java_table(spark, name)
    log = TableLog(None, {}, int(table.schema().schemaId()))
    current = table.currentSnapshot()
    if current is None:
        return log
    snapshot = read_snapshot(spark, current)
    log.current = snapshot.snapshot_id
    while True:
        log.snapshots[snapshot.snapshot_id] = snapshot
        if snapshot.snapshot_id == back_to or snapshot.parent_id is None:
            break
        if back_to is None and (not data or snapshot.operation != "replace"):
            break
        parent = table.snapshot(snapshot.parent_id)
        if parent is None:  # expired
            break
        snapshot = read_snapshot(spark, parent)
    return log


def read_logs(spark: SparkSession, view: str, sources: list[str]) -> dict[str, TableLog]:
    """What a refresh of ``view`` over ``sources`` (full names) needs of their metadata: the
    view's latest data snapshot (its cursors) and each source's snapshots since its cursor
    (:class:`TableLog`); no Spark job."""
    logs = {view: _read_log(spark, view, None, data=True)}
    latest = logs[view].latest_data_snapshot()
    summary = latest.summary if latest else {}
    for source in sources:
        cursor = summary.get(CURSOR_PROPERTY + source)
        logs[source] = _read_log(spark, source, None if cursor is None else int(cursor), data=False)
    return logs


def rebuild_reason(view: str, source: str, logs: dict[str, TableLog]) -> str | None:
    """Why ``source``'s window cannot be read from Iceberg (None: it can)."""
    latest = logs[view].latest_data_snapshot()
    cursor = (latest.summary if latest else {}).get(CURSOR_PROPERTY + source)
    if cursor is None:
        return (
            f"no cursor for source {source} in the snapshots of {view} (not"
            " initialized, or the table was written outside duckstream)"
        )
    log = logs[source]
    if log.current is None:
        return f"source {source} has no snapshot (never written, or re-created)"
    window = log.since(int(cursor))
    if window is None:
        return (
            f"the cursor snapshot of {source} is no longer in its history: expired, or the"
            " table was re-created, replaced or rolled back"
        )
    written = log.snapshots[int(cursor)].schema_id
    if written is not None and written != log.schema_id:
        return f"the schema of {source} changed"
    if any(s.count("total-delete-files") for s in window if s.operation != "replace"):
        return (
            f"{source} has delete files (merge-on-read), which Iceberg's changelog cannot"
            " read; keep sources copy-on-write (write.delete.mode, write.update.mode,"
            " write.merge.mode)"
        )
    return None


def pin(spec: WindowPin, logs: dict[str, TableLog]) -> Pinned:
    """The window's run-time values, as ``spec.query`` computes them, and its checks
    (``spec.check``): raises :class:`RebuildRequired` with the reason the SQL would give."""
    values: dict[str, str] = {}
    appends: dict[str, tuple[str, int, int]] = {}
    unchanged: dict[str, str] = {}
    latest = logs[spec.view].latest_data_snapshot()
    summary = latest.summary if latest else {}
    any_changed = False
    for source in spec.sources:
        why = rebuild_reason(spec.view, source.table, logs)
        if why is not None:
            raise RebuildRequired(REBUILD + why)
        log = logs[source.table]
        cursor, end = int(summary[CURSOR_PROPERTY + source.table]), log.current
        assert end is not None
        changed = end != cursor
        values[f"{spec.prefix}end_{source.index}"] = str(end)
        values[f"{spec.prefix}cursor_{source.index}"] = str(cursor)
        values[f"{spec.prefix}changed_{source.index}"] = str(changed).lower()
        any_changed = any_changed or changed
        window = log.since(cursor) or []
        if not changed:
            unchanged[source.changes_view] = source.table
        elif all(s.operation in _APPENDS for s in window):
            appends[source.changes_view] = (source.table, cursor, end)
    values[f"{spec.prefix}changed"] = str(any_changed).lower()
    return Pinned(values, appends, unchanged)


def register_appends(spark: SparkSession, view: str, table: str, cursor: int, end: int) -> None:
    """Read the rows ``table``'s snapshots after ``cursor`` up to ``end`` appended into the
    temp view ``view``, shaped as Iceberg's changelog view (its columns, then
    ``_change_type`` = INSERT, ``_change_ordinal``, ``_commit_snapshot_id``): the incremental
    append scan, which reads the added data files alone."""
    from pyspark.sql import functions as F

    rows = (
        spark.read.format("iceberg")
        .option("start-snapshot-id", str(cursor))
        .option("end-snapshot-id", str(end))
        .load(exp.to_table(table).sql(DIALECT))
    )
    rows.select(
        "*",
        F.lit("INSERT").alias("_change_type"),
        F.lit(0).alias("_change_ordinal"),
        F.lit(end).cast("bigint").alias("_commit_snapshot_id"),
    ).createOrReplaceTempView(view)


def register_no_changes(spark: SparkSession, view: str, table: str) -> None:
    """The temp view ``view`` of no rows, shaped as ``table``'s changelog view: the changes
    of a source whose window is empty (its delta terms are switched off by a literal
    ``false`` and never read it, but Spark resolves them). Iceberg's changelog refuses an
    empty window, and creating one costs a call to the catalog."""
    from pyspark.sql import functions as F

    spark.read.table(exp.to_table(table).sql(DIALECT)).where(F.lit(False)).select(
        "*",
        F.lit("INSERT").alias("_change_type"),
        F.lit(0).alias("_change_ordinal"),
        F.lit(0).cast("bigint").alias("_commit_snapshot_id"),
    ).createOrReplaceTempView(view)


def give_first_snapshots(spark: SparkSession, tables: list[str]) -> list[str]:
    """Commit an empty append (no data file: metadata only) to each of ``tables`` that has
    no snapshot yet (created, never written), so that a fill can pin it; returns their
    names. The snapshot carries the property ``duckstream.first-snapshot``."""
    given = []
    for name in dict.fromkeys(tables):
        table = java_table(spark, name)
        if table.currentSnapshot() is None:
            table.newAppend().set(FIRST_SNAPSHOT, "a snapshot to pin").commit()
            given.append(name)
    return given
