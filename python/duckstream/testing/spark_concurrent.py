"""Processes that write to and refresh one Iceberg warehouse at once, for the multi-process
Spark tests: the Spark + Iceberg counterpart of :mod:`duckstream.testing.concurrent`.

Each process starts its own local Spark (:func:`duckstream.spark.local_session`) over the same
Hadoop-catalog warehouse. :func:`write` commits random inserts, deletes and updates of the
sources (each statement its own commit: Spark has no multi-statement transactions);
:func:`refresh_views` is a second refresher of the same views. Both are plain functions of
picklable arguments, for ``multiprocessing`` with the ``spawn`` start method (a fresh
interpreter, and its own JVM).

:func:`at_cursors` checks a view mid-run: its rows at its current snapshot must equal its
SELECT run on the sources as of the snapshots that snapshot's cursors name.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from duckstream.plan import IVMPlan
from duckstream.testing.concurrent import transaction


def _session(warehouse: str, conf: Mapping[str, str]) -> Any:
    from duckstream.spark import local_session

    return local_session(warehouse, app_name="duckstream-peer", cores=1, extra_conf=conf)


def write(
    warehouse: str,
    namespace: str,
    tables: list[str],
    seed: int,
    commits: int,
    pause: float,
    conf: Mapping[str, str],
) -> dict[str, int]:
    """A writer process: ``commits`` random statements on ``tables`` of ``lake.<namespace>``
    (columns ``k``, ``v``), each its own Iceberg commit, a random pause up to ``pause``
    seconds after each."""
    rng = random.Random(seed)
    spark = _session(warehouse, conf)
    done = 0
    try:
        while done < commits:
            (statement,) = transaction(rng, tables, 1)
            spark.sql(statement.replace("lake.main.", f"lake.{namespace}."))
            done += 1
            time.sleep(rng.random() * pause)
    finally:
        spark.stop()
    return {"commits": done}


def refresh_views(
    warehouse: str,
    views: list[dict[str, Any]],
    stop: str,
    strategy: str,
    conf: Mapping[str, str],
) -> dict[str, int]:
    """A second refresher process: refresh each view of ``views`` (``compile_ivm`` keyword
    arguments, Spark SQL) with ``strategy``, round after round, until the file ``stop``
    exists; a refresh that lost the race to another refresh of the same view
    (:class:`~duckstream.errors.RefreshConflict`) is counted and left to the next round."""
    from duckstream.compiler import compile_ivm
    from duckstream.errors import RefreshConflict
    from duckstream.spark import refresh

    spark = _session(warehouse, conf)
    plans = [compile_ivm(**view) for view in views]
    counts = {"refreshes": 0, "conflicts": 0}
    try:
        while not os.path.exists(stop):
            for plan in plans:
                try:
                    refresh(spark, plan, strategy=strategy)
                    counts["refreshes"] += 1
                except RefreshConflict:
                    counts["conflicts"] += 1
    finally:
        spark.stop()
    return counts


def at_cursors(spark: Any, plan: IVMPlan, view_sql: str) -> tuple[Counter, Counter]:
    """``(rows of the view, rows of its SELECT at its cursor snapshots)`` as multisets, both
    read at the view's current snapshot (``view_sql``: Spark SQL naming every source in full,
    ``catalog.schema.table``, as the plan's sources are named)."""
    from duckstream.engines.iceberg.window import CURSOR_PROPERTY, java_table, read_snapshot

    table = java_table(spark, plan.mv_table)
    snapshot = read_snapshot(spark, table.currentSnapshot())
    recomputed = view_sql
    for source in sorted(plan.tables, key=len, reverse=True):
        cursor = int(snapshot.summary[CURSOR_PROPERTY + source])
        recomputed = recomputed.replace(source, f"{source} VERSION AS OF {cursor}")
    query_mv = plan.query_mv.replace(
        plan.mv_table, f"{plan.mv_table} VERSION AS OF {snapshot.snapshot_id}"
    )
    rows = Counter(tuple(r) for r in spark.sql(query_mv).collect())
    expected = Counter(tuple(r) for r in spark.sql(recomputed).collect())
    return rows, expected
