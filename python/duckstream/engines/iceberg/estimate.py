"""Estimate a Spark refresh window from Iceberg metadata alone, and choose (``strategy='auto'``).

``choose(spark, plan)`` reads the snapshots of the view's table and of each source from their
Iceberg metadata (:func:`.window.read_logs`: no Spark job, and the refresh's pin reuses the
same read). No data file is read. From them:

* each source's **cursor**: the ``duckstream.cursor.<source>`` snapshot properties of the
  view's latest snapshot that is not a compaction (``replace``), as the plan's own ``set``
  query reads them;
* its **window**: the snapshots from its current one back, through ``parent_id``, to the
  cursor (exclusive). Not reaching the cursor means it was expired, or the table was
  re-created, replaced or rolled back: Iceberg has no change feed for that window;
* per window snapshot, its summary: ``added-records`` and ``deleted-records`` are the rows of
  the data files it added and removed. That is exactly what the changelog reads: a
  copy-on-write delete, update or merge rewrites every data file holding a touched row, and
  the changelog reads the old files whole as deletions and the new ones as insertions before
  pairing off the unchanged rows (the carry-over). So ``inserted`` and ``deleted`` count data
  file rows, not logical row changes (one deleted row in a 1M-row file counts as ``-1M``
  ``+999,999``), and ``scanned`` = ``deleted`` (the removed files are read whole);
  compactions (``replace``) change no row and the changelog skips them;
* ``rows`` is the current snapshot's ``total-records``.

Rebuild reasons, found here before a refresh is attempted (:func:`.window.rebuild_reason`,
the pin's own checks): no cursors in the view's table (never initialized, or written outside
duckstream), a source with no snapshot, a cursor that is no longer an ancestor, a schema
changed since the cursor's snapshot, and equality delete files in the window. A window
with position delete files (merge-on-read deletes and updates: the summary's
``total-delete-files``) is read by position (:func:`.window.register_positional`): its
deletions are the position deletes it added, and it reads the data files they touch twice,
counted as the whole table (which files they are, only the manifests say).

The choice itself is :func:`duckstream.strategy.decide` with :class:`SparkPolicy`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from duckstream.engines.iceberg.window import (
    APPENDS,
    CURSOR_PROPERTY,
    TableLog,
    has_delete_files,
    read_logs,
    rebuild_reason,
)
from duckstream.plan import IVMPlan
from duckstream.strategy import History, Policy, RefreshReport, SourceEstimate, calibrate, decide

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Appended to the reason when a window removed data files: why one deleted row may count 1M.
REWRITES = " (copy-on-write: rows of the rewritten data files, which the changelog reads)"


@dataclass(frozen=True)
class SparkPolicy(Policy):
    """The cost model's constants for Spark + Iceberg, in rows a recomputation reads.

    Calibrated on ``docs/benchmarks_spark.md`` (SF 0.1 and 1, a local session on 2 cores):
    recomputing a TPC-H view at SF 1 reads a median 2.7M rows/s over the nine queries (1.2M
    for Q1 to 8.6M for Q6), and an incremental refresh of an append takes a median 4.6 s
    (1.8 s for a one-source view, up to 8 s joining six sources), nearly the same at SF 0.1
    as at SF 1: a chain of Spark jobs whose cost hardly depends on the data. 4.6 s at
    2.7M rows/s is the fixed ``overhead_rows`` of 12M (DuckDB's: 2M). With it every
    measured SF 0.1 and SF 1 append rebuilds, which the benchmark says is faster on all but
    Q1 at SF 1 (2.5 s incremental, 5.0 s recomputed), and appends to views of 12M rows and
    more stay incremental. The reaches are DuckDB's: the refresh times hardly grew with the
    joined tables from SF 0.1 to 1, so appended keys prune most of them (``insert_reach``
    0.1); deleted keys prune nothing and a scan filtered by them costs a row as much as
    the rebuild (``delete_reach`` 1.0; DuckDB's is lower). Deletes and updates rewrite whole
    data files, counted in the estimate as changed rows: at SF 1 they rewrite every file
    (``mixed``, ``update``: 30-48 s incremental against 0.5-6.5 s recomputed), far above
    ``max_fraction``.
    """

    overhead_rows: int = 12_000_000
    delete_reach: float = 1.0


def estimate_window(
    mv_table: str, sources: list[str], logs: dict[str, TableLog]
) -> dict[str, SourceEstimate] | str:
    """Per source, what its window holds (see the module docstring); or why the view must be
    rebuilt. Pure: ``logs`` is what :func:`read_logs` found."""
    latest = logs[mv_table].latest_data_snapshot()
    summary = latest.summary if latest else {}
    estimates: dict[str, SourceEstimate] = {}
    for source in sources:
        why = rebuild_reason(mv_table, source, logs)
        if why is not None:
            return why
        log = logs[source]
        assert log.current is not None
        cursor = int(summary[CURSOR_PROPERTY + source])
        window = log.since(cursor) or []
        changes = [s for s in window if s.operation != "replace"]
        deleted = sum(s.count("deleted-records") for s in changes)
        rows = log.snapshots[log.current].count("total-records")
        scanned = deleted
        if has_delete_files(log, cursor) and not all(s.operation in APPENDS for s in window):
            # read by position: the deleted rows, and the touched data files read twice;
            # which files those are the summaries do not say: all of them, at most
            deleted += sum(
                max(s.count("added-position-deletes") - s.count("removed-position-deletes"), 0)
                for s in changes
            )
            scanned = max(rows, deleted)
        estimates[source] = SourceEstimate(
            source,
            rows=rows,
            inserted=sum(s.count("added-records") for s in changes),
            deleted=deleted,
            scanned=scanned,
        )
    return estimates


def estimate(
    spark: SparkSession, plan: IVMPlan, logs: dict[str, TableLog] | None = None
) -> dict[str, SourceEstimate] | str:
    """Per source of ``plan``, what its window holds; or why it must be rebuilt. ``logs``:
    the metadata already read for this refresh (:func:`.window.read_logs`), else read here."""
    sources = plan.tables
    if logs is None:
        logs = read_logs(spark, plan.mv_table, sources)
    return estimate_window(plan.mv_table, sources, logs)


def choose(
    spark: SparkSession,
    plan: IVMPlan,
    policy: Policy | None = None,
    *,
    logs: dict[str, TableLog] | None = None,
) -> RefreshReport:
    """Estimate the window from Iceberg metadata (``logs`` when already read) and decide
    (:class:`SparkPolicy` unless ``policy`` is given), then decide again on the view's own
    measured refreshes (:func:`~duckstream.strategy.calibrate`; their times are the
    commits' ``timestamp-ms`` less the refresh's start: :func:`.window.measurements`), as
    on DuckLake; runs nothing else."""
    start = time.perf_counter()
    if logs is None:
        logs = read_logs(spark, plan.mv_table, plan.tables, measured=True)
    found = estimate(spark, plan, logs)
    if isinstance(found, str):
        report = RefreshReport("full", "auto", found)
    else:
        chosen = policy or SparkPolicy()
        report = decide(found, chosen)
        if any(s.deleted for s in found.values()):
            report.reason += REWRITES
        report = calibrate(report, History.of(logs[plan.mv_table].measured), chosen)
    report.estimate_seconds = time.perf_counter() - start
    return report
