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
  must be the one the cursor snapshot was written with; a source with equality delete
  files in the window needs a rebuild too (the plan's SQL, reading Iceberg's changelog,
  fails on any delete file: the runner reads those windows by position, below);
* a window whose snapshots are all appends (compactions, ``replace``, change no row) is read
  with Iceberg's incremental append scan (:func:`register_appends`): the rows the window's
  snapshots added, read from their new data files alone, where the changelog view plans a
  scan of every snapshot's added and removed files and pairs off carry-over rows;
* a window of a table with delete files (merge-on-read deletes, updates, merges), which
  Iceberg's changelog refuses, is read by position (:func:`register_positional`): the rows
  of the added data files, and the rows of the data files that lost some whose position is
  gone at the end snapshot. Equality delete files name no position: a rebuild.

A source that was never written has no snapshot to pin: before a fill pins its snapshots
(``initialize_cursors``), :func:`give_first_snapshots` commits an empty append to each such
source (metadata only: no data file, no row), which its time travel and change feed then
start from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from duckstream.engines.iceberg.dialect import DIALECT
from duckstream.errors import DuckstreamError, RebuildRequired
from duckstream.history import ICEBERG_PROPERTY, Entry
from duckstream.strategy import Measured

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CURSOR_PROPERTY = "duckstream.cursor."
# The clock the commit's refresh read (microseconds since the epoch), for a view that reads
# it (normalize.pin_clock); the Spark setting ``NOW_SETTING`` sets it (an ISO timestamp with
# its offset: tests and replays), else it is the runner's clock.
CLOCK_PROPERTY = "duckstream.clock"
NOW_SETTING = "spark.duckstream.now"
REBUILD = "duckstream: rebuild required: "
# Snapshot operations the incremental append scan reads completely: it reads ``append``
# snapshots and skips the rest, right for compactions (``replace``: no row changes), wrong for
# ``overwrite`` and ``delete``.
APPENDS = {"append", "replace"}
FIRST_SNAPSHOT = "duckstream.first-snapshot"
# When the refresh that made a view's snapshot started (ms since the epoch): the snapshot's
# own commit time less this is what the refresh took, its commit included (its history entry
# is written before the statement that commits it, so cannot time that statement).
STARTED_PROPERTY = "duckstream.started-ms"
MEASURED_RUNS = 12  # the view's newest refreshes auto's calibration reads


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
    # the view's newest refreshes, newest first (:func:`measurements`; read for views only)
    measured: tuple[Measured, ...] = ()

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
    # the clock values the view reads in temporal filters, and elsewhere (WindowSpec's)
    clock_filters: tuple[str, ...] = ()
    clock_rebuilds: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.query


def now_micros(spark: SparkSession) -> int:
    """The clock a refresh reads, once: :data:`NOW_SETTING` when set, else now."""
    import datetime

    setting = spark.conf.get(NOW_SETTING, None)
    now = (
        datetime.datetime.fromisoformat(setting) if setting else datetime.datetime.now(datetime.UTC)
    )
    if now.tzinfo is None:
        raise DuckstreamError(f"duckstream: {NOW_SETTING} = {setting!r} needs a time zone")
    return int(now.timestamp()) * 1_000_000 + now.microsecond


def clock_value(micros: int, kind: str, zone: str | None) -> str:
    """The clock value ``kind`` of the instant ``micros`` as text, in Spark's session time
    zone ``zone`` (a region or offset Python knows; else the instant itself, which moves
    whenever the date may have: a rebuild or a crossing read too many, never a wrong row).

    >>> clock_value(1_768_046_400_000_000, "current_date", "UTC")
    '2026-01-10'
    >>> clock_value(1_768_046_400_000_000, "current_timestamp", "UTC")
    '2026-01-10 12:00:00+00:00'
    """
    import datetime
    import zoneinfo

    try:
        tz: datetime.tzinfo = zoneinfo.ZoneInfo(zone or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        tz = datetime.UTC
        if kind != "current_timestamp":
            return str(micros)
    instant = datetime.datetime.fromtimestamp(micros / 1_000_000, tz)
    return str(instant.date()) if kind == "current_date" else str(instant)


@dataclass(frozen=True)
class SnapshotPin:
    """The spec of an Iceberg plan's :class:`~duckstream.plan.PinSnapshot` (a fill): the
    run-time values' prefix and the sources (full name, index), each pinned at its current
    snapshot as both end and cursor."""

    prefix: str
    sources: tuple[tuple[str, int], ...]
    clock: bool = False  # the view reads the clock: pin it too

    def values(
        self, spark: SparkSession, logs: dict[str, TableLog] | None = None
    ) -> dict[str, str]:
        """The values the plan's SQL pin computes, from metadata; first gives a snapshot to
        each source that has none (:func:`give_first_snapshots`). ``logs``: the sources'
        metadata this refresh read already (:func:`read_logs`, for ``auto``'s estimate):
        their current snapshots are pinned as read, without loading each table twice more
        (30-50 ms a rebuild on ``local[2]``)."""
        tables = list(dict.fromkeys(table for table, _ in self.sources))
        known = logs or {}
        if all(known.get(t) is not None and known[t].current is not None for t in tables):
            current = {t: known[t].current for t in tables}
        else:
            give_first_snapshots(spark, tables)
            current = {}
            for table in tables:
                snapshot = java_table(spark, table).currentSnapshot()
                current[table] = None if snapshot is None else int(snapshot.snapshotId())
        values: dict[str, str] = {}
        if self.clock:
            now = str(now_micros(spark))
            values[f"{self.prefix}clock"] = values[f"{self.prefix}clock_old"] = now
            values[f"{self.prefix}clock_moved"] = "false"
        for table, index in self.sources:
            snapshot_id = current[table]
            if snapshot_id is None:  # dropped and re-created in between
                raise DuckstreamError(f"duckstream: source {table} has no snapshot")
            values[f"{self.prefix}end_{index}"] = values[f"{self.prefix}cursor_{index}"] = str(
                snapshot_id
            )
        return values


@dataclass
class Pinned:
    """A window pinned by :func:`pin`: the run-time values, and the changes views of the
    changed sources whose window holds appends only (read by :func:`register_appends`)."""

    values: dict[str, str]
    appends: dict[str, tuple[str, int, int]]  # changes view -> (table, cursor, end)
    unchanged: dict[str, str]  # changes view -> table
    # changes view -> (table, cursor, end): windows with delete files (merge-on-read)
    positional: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # changes view -> (table, cursor, end): the other changed windows (Iceberg's changelog)
    changelog: dict[str, tuple[str, int, int]] = field(default_factory=dict)


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


def measurements(snapshots: list[dict[str, Any]]) -> tuple[Measured, ...]:
    """The refreshes of a view, newest first, from its snapshots (as in Iceberg's table
    metadata JSON, rolled-back ones included: a refresh's time stays a fact about the view):
    path and cost from the history entry (:data:`ICEBERG_PROPERTY`), time from the commit's
    ``timestamp-ms`` less :data:`STARTED_PROPERTY`.

    >>> entry = '{"path": "full", "ms": 3.0, "cost": 9.0}'
    >>> measurements([
    ...     {"timestamp-ms": 1500, "summary": {"duckstream.refresh": entry,
    ...                                         "duckstream.started-ms": "1000"}},
    ...     {"timestamp-ms": 2500, "summary": {"duckstream.refresh": entry}},  # no start
    ... ])
    (Measured(path='full', ms=500.0, cost=9.0),)
    """
    found = []
    for snapshot in snapshots:
        summary = snapshot.get("summary") or {}
        entry, started = summary.get(ICEBERG_PROPERTY), summary.get(STARTED_PROPERTY)
        committed = snapshot.get("timestamp-ms")
        if entry is None or started is None or committed is None:
            continue
        recorded = Entry.from_dict(json.loads(entry))
        ms = float(int(committed) - int(started))
        if ms < 0:  # clocks of two hosts apart: no measurement
            continue
        found.append((int(committed), Measured(recorded.path, ms, recorded.cost)))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return tuple(m for _, m in found[:MEASURED_RUNS])


def _measured(spark: SparkSession, table: Any) -> tuple[Measured, ...]:
    """:func:`measurements` of the Iceberg ``table`` (one call: its metadata as JSON)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    metadata = jvm.org.apache.iceberg.TableMetadataParser.toJson(table.operations().current())
    return measurements(json.loads(metadata).get("snapshots") or [])


def _read_log(
    spark: SparkSession, name: str, back_to: int | None, *, data: bool, measured: bool = False
) -> TableLog:
    """``name``'s current snapshot and its ancestors back to ``back_to`` (included: its
    schema), or back to the first non-compaction (``data``: a view), or just the current
    one; with ``measured``, its refreshes' times too."""
    table = java_table(spark, name)
    log = TableLog(None, {}, int(table.schema().schemaId()))
    if measured:
        log.measured = _measured(spark, table)
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


def read_logs(
    spark: SparkSession, view: str, sources: list[str], *, measured: bool = False
) -> dict[str, TableLog]:
    """What a refresh of ``view`` over ``sources`` (full names) needs of their metadata: the
    view's latest data snapshot (its cursors) and each source's snapshots since its cursor
    (:class:`TableLog`); with ``measured``, the view's refreshes' times (for ``auto``: its
    metadata as JSON, 10-60 ms); no Spark job."""
    logs = {view: _read_log(spark, view, None, data=True, measured=measured)}
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
    if any(s.count("added-equality-delete-files") for s in window):
        return (
            f"{source} has equality delete files in the window, which say which rows they"
            " delete only by value: read them by a rebuild"
        )
    return None


def has_delete_files(log: TableLog, cursor: int) -> bool:
    """Whether the table holds delete files (merge-on-read) at ``cursor`` or after it up to
    its current snapshot: Iceberg's changelog then refuses the window (also one that only
    removes the data files they apply to), and :func:`register_positional` reads it."""
    window = [*(log.since(cursor) or []), log.snapshots.get(cursor)]
    return any(s.count("total-delete-files") for s in window if s is not None)


def pin_clock(
    spec: WindowPin, summary: dict[str, str], now: int, zone: str | None
) -> dict[str, str]:
    """The window's clock values (``clock``, ``clock_old``: the one recorded with the cursors,
    ``clock_moved``) at the instant ``now``; :class:`RebuildRequired` when a clock value the
    view reads outside its temporal filters moved, or none was recorded."""
    recorded = summary.get(CLOCK_PROPERTY)
    if recorded is None:
        raise RebuildRequired(REBUILD + "no clock recorded with the view's cursors")
    old = int(recorded)
    for kind in spec.clock_rebuilds:
        before, after = clock_value(old, kind, zone), clock_value(now, kind, zone)
        if before != after:
            raise RebuildRequired(
                REBUILD + f"the view reads {kind}, which moved from {before} to {after}"
            )
    moved = any(
        clock_value(old, kind, zone) != clock_value(now, kind, zone) for kind in spec.clock_filters
    )
    return {
        f"{spec.prefix}clock": str(now),
        f"{spec.prefix}clock_old": str(old),
        f"{spec.prefix}clock_moved": str(moved).lower(),
    }


def pin(
    spec: WindowPin,
    logs: dict[str, TableLog],
    now: int | None = None,
    zone: str | None = None,
) -> Pinned:
    """The window's run-time values, as ``spec.query`` computes them, and its checks
    (``spec.check``): raises :class:`RebuildRequired` with the reason the SQL would give.
    ``now``: the clock (microseconds) and ``zone`` Spark's session time zone, for a view
    that reads the clock (:func:`pin_clock`)."""
    values: dict[str, str] = {}
    appends: dict[str, tuple[str, int, int]] = {}
    unchanged: dict[str, str] = {}
    positional: dict[str, tuple[str, int, int]] = {}
    changelog: dict[str, tuple[str, int, int]] = {}
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
        elif all(s.operation in APPENDS for s in window):
            appends[source.changes_view] = (source.table, cursor, end)
        elif has_delete_files(log, cursor):
            positional[source.changes_view] = (source.table, cursor, end)
        else:
            changelog[source.changes_view] = (source.table, cursor, end)
    if spec.clock_filters or spec.clock_rebuilds:
        assert now is not None, "a view reading the clock is pinned with it"
        values |= pin_clock(spec, summary, now, zone)
        any_changed = any_changed or values[f"{spec.prefix}clock_moved"] == "true"
    values[f"{spec.prefix}changed"] = str(any_changed).lower()
    return Pinned(values, appends, unchanged, positional, changelog)


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


def _files(spark: SparkSession, table: str, cursor: int, end: int) -> tuple[list[str], list[str]]:
    """The data files ``table``'s snapshots after ``cursor`` up to ``end`` added, and those
    live at ``cursor`` that lost rows in them (removed, or given position deletes: each of
    Spark's delete files names its one data file, in its ``file_path`` bounds)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java = java_table(spark, table)
    io = java.io()
    path_id = jvm.org.apache.iceberg.MetadataColumns.DELETE_FILE_PATH.fieldId()
    strings = jvm.org.apache.iceberg.types.Types.StringType.get()
    convert = jvm.org.apache.iceberg.types.Conversions
    added: list[str] = []
    touched: list[str] = []
    at = end
    while at != cursor:
        snapshot = java.snapshot(at)
        if snapshot is None:
            raise RebuildRequired(f"{REBUILD}the window of {table} is no longer in its history")
        for file in snapshot.addedDataFiles(io):
            added.append(str(file.location()))
        for file in snapshot.removedDataFiles(io):
            touched.append(str(file.location()))
        for file in snapshot.addedDeleteFiles(io):
            if file.content().toString() != "POSITION_DELETES":
                raise RebuildRequired(f"{REBUILD}{table} has equality delete files in the window")
            referenced = file.referencedDataFile()
            if referenced is None:
                low, high = file.lowerBounds(), file.upperBounds()
                low = low.get(path_id) if low is not None else None
                high = high.get(path_id) if high is not None else None
                first = str(convert.fromByteBuffer(strings, low)) if low is not None else None
                last = str(convert.fromByteBuffer(strings, high)) if high is not None else None
                if first is None or first != last:
                    raise RebuildRequired(
                        f"{REBUILD}a delete file of {table} covers several data files"
                    )
                referenced = first
            touched.append(str(referenced))
        at = snapshot.parentId()
    return sorted(set(added)), sorted(set(touched))


def register_positional(spark: SparkSession, view: str, table: str, cursor: int, end: int) -> None:
    """Read the rows ``table``'s snapshots after ``cursor`` up to ``end`` inserted and
    deleted into the temp view ``view`` (shaped as :func:`register_appends`' view), where
    the window holds delete files (merge-on-read), which Iceberg's changelog refuses:

    * inserted: the rows, at ``end``, of the data files the window added;
    * deleted: the rows, at ``cursor``, of the data files that lost rows in the window
      (removed, or given position deletes: :func:`_files`) whose position (``_file``,
      ``_pos``) is gone at ``end``. A data file never changes, and a position delete
      removes one position of it: those rows alone, without the carry-over rows a
      copy-on-write rewrite makes.

    An update is a deletion and an insertion (its new row is in an added file). Reads the
    touched data files twice, and no other."""
    from pyspark.sql import functions as F

    added, touched = _files(spark, table, cursor, end)
    name = exp.to_table(table).sql(DIALECT)
    columns = spark.read.table(name).columns

    def at(snapshot: int) -> Any:
        return spark.sql(f"SELECT *, _file, _pos FROM {name} VERSION AS OF {snapshot}")

    def shaped(rows: Any, change: str) -> Any:
        return rows.select(
            *columns,
            F.lit(change).alias("_change_type"),
            F.lit(0).alias("_change_ordinal"),
            F.lit(end).cast("bigint").alias("_commit_snapshot_id"),
        )

    inserted = at(end).where(F.col("_file").isin(added))
    kept = at(end).where(F.col("_file").isin(touched)).select("_file", "_pos")
    gone = at(cursor).where(F.col("_file").isin(touched)).join(kept, ["_file", "_pos"], "left_anti")
    shaped(inserted, "INSERT").unionByName(shaped(gone, "DELETE")).createOrReplaceTempView(view)


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
