"""Processes that write to and refresh one DuckLake at once, for the multi-process tests.

A DuckLake whose catalog is in PostgreSQL admits commits from any number of processes
(:mod:`duckstream.testing.postgres`). :func:`write` is a writer: random inserts, deletes and
updates of the sources, several statements to a transaction, committed while other
processes refresh views over them. :func:`refresh_views` is a second refresher of the same
views. Both are plain functions of picklable arguments, for ``multiprocessing`` with the
``spawn`` start method (a fresh interpreter: DuckDB is not fork-safe).

:func:`at_cursors` checks a view mid-run: its committed rows must equal its SELECT run on
the sources as of the snapshot its newest cursors name, both read in one transaction, from
DuckLake's own view of the catalog (``ducklake_snapshots``), so a refresh committing
meanwhile cannot make the two disagree.

>>> transaction(random.Random(1), ["t1"], 2)[0]
'DELETE FROM lake.main.t1 WHERE k = 1 AND v % 2 = 0'
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from collections import Counter
from typing import Any

from duckstream.errors import DuckstreamError, RebuildRequired

KEYS = 8  # keys 0..7: writers and views keep meeting on the same few groups


def transaction(rng: random.Random, tables: list[str], statements: int) -> list[str]:
    """One writer transaction: ``statements`` random inserts, deletes or updates of
    ``tables`` (columns ``k``, ``v``; a row updated or deleted after it was inserted in the
    same transaction is one of the shapes DuckLake's change feed lists oddly)."""
    found = []
    for _ in range(statements):
        table = f"lake.main.{rng.choice(tables)}"
        kind = rng.random()
        if kind < 0.5:
            values = ", ".join(
                f"({rng.randrange(KEYS)}, {rng.choice(['NULL', *map(str, range(20))])})"
                for _ in range(rng.randint(1, 4))
            )
            found.append(f"INSERT INTO {table} VALUES {values}")
        elif kind < 0.75:
            found.append(f"DELETE FROM {table} WHERE k = {rng.randrange(KEYS)} AND v % 2 = 0")
        else:
            found.append(
                f"UPDATE {table} SET v = coalesce(v, 0) + 1 WHERE k = {rng.randrange(KEYS)}"
            )
    return found


def write(
    directory: str, metadata: str, tables: list[str], seed: int, commits: int, pause: float
) -> dict[str, int]:
    """A writer process: ``commits`` committed random transactions, each retried while
    DuckLake refuses it for a conflict with another writer's (two writers deleting from and
    inserting into one table at once); a random pause up to ``pause`` seconds after each."""
    from duckstream.testing.ducklake import connect_ducklake

    rng = random.Random(seed)
    con = connect_ducklake(directory, "lake", metadata=metadata)
    done = retried = 0
    try:
        while done < commits:
            statements = transaction(rng, tables, rng.randint(1, 3))
            while True:
                try:
                    con.execute("BEGIN TRANSACTION")
                    for statement in statements:
                        con.execute(statement)
                    con.execute("COMMIT")
                    break
                except Exception as error:
                    _rollback(con)
                    if "conflict" not in str(error).lower():
                        raise
                    retried += 1
                    time.sleep(rng.random() * pause)
            done += 1
            time.sleep(rng.random() * pause)
    finally:
        con.close()
    return {"commits": done, "retried": retried}


def refresh_views(
    directory: str,
    metadata: str,
    views: list[dict[str, Any]],
    stop: str,
    strategy: str,
) -> dict[str, int]:
    """A second refresher process: refresh each view of ``views`` (``compile_ivm`` keyword
    arguments, ``view_sql`` among them) with ``strategy``, round after round, until the file
    ``stop`` exists; a refresh that conflicts with another process's refresh of the same view
    (:class:`~duckstream.errors.RefreshConflict`) is counted and left to
    the next round; one that cannot be incremental (:class:`RebuildRequired`) is rebuilt,
    as ``auto`` does."""
    from duckstream.compiler import compile_ivm
    from duckstream.errors import RefreshConflict
    from duckstream.runtime import refresh
    from duckstream.testing.ducklake import connect_ducklake

    con = connect_ducklake(directory, "lake", metadata=metadata)
    plans = [compile_ivm(**view) for view in views]
    counts = {"refreshes": 0, "conflicts": 0, "rebuilds": 0}
    try:
        while not os.path.exists(stop):
            for plan in plans:
                try:
                    try:
                        refresh(con, plan, strategy=strategy)
                        counts["refreshes"] += 1
                    except RebuildRequired:  # DuckLake mislabelled deletions: as auto does
                        refresh(con, plan, strategy="full")
                        counts["rebuilds"] += 1
                except RefreshConflict:
                    counts["conflicts"] += 1
    finally:
        con.close()
    return counts


def at_cursors(
    con: Any, plan: Any, view_sql: str, catalog: str = "lake"
) -> tuple[Counter, Counter]:
    """``(rows of the view, rows of its SELECT at its cursor snapshot)``, as multisets, read
    in one transaction (``view_sql`` names its sources in full, ``catalog.schema.table``;
    every source in ``catalog``)."""
    con.execute("BEGIN TRANSACTION")
    try:
        (info,) = con.execute(
            "SELECT commit_extra_info FROM ducklake_snapshots(?) WHERE author = 'duckstream'"
            " AND commit_message = ? ORDER BY snapshot_id DESC LIMIT 1",
            [catalog, f"cursors of {plan.mv_table}"],
        ).fetchone()
        snapshots = {c["snapshot"] for c in json.loads(info)["cursors"]}
        if len(snapshots) != 1:
            raise DuckstreamError(f"cursors at several snapshots: {sorted(snapshots)}")
        (snapshot,) = snapshots
        recomputed = view_sql
        for name in sorted({f"{s.catalog}.{s.schema}.{s.table}" for s in plan.sources}):
            recomputed = recomputed.replace(
                name, f"(SELECT * FROM {name} AT (VERSION => {int(snapshot)}))"
            )
        rows = Counter(con.execute(plan.query_mv).fetchall())
        expected = Counter(con.execute(recomputed).fetchall())
    finally:
        _rollback(con)
    return rows, expected


def _rollback(con: Any) -> None:
    with contextlib.suppress(Exception):  # no transaction open: nothing to roll back
        con.execute("ROLLBACK")
