"""Choose, per refresh, between incremental maintenance and a full rebuild, and say why.

``refresh(con, plan, strategy="auto")`` first *estimates* the window's changes from DuckLake's
catalog alone -- rows of the data files, delete files and inlined rows each source gained since
its cursor -- without reading a single changed row, then runs either ``plan.maintain`` (apply
the change feed) or ``plan.initialize_cursors`` (pin a snapshot, rebuild the table, record the
cursors: atomic, like ``maintain``). It returns a :class:`RefreshReport`: what was done and why.

The cost model counts *rows read*, because both paths are dominated by scans:

* full refresh: every source is scanned once: ``full = sum(rows of each source)``;
* incremental: a fixed cost per refresh (its statements, the writes to the view's table and
  cursors, the commit), then for every source ``s`` that changed, its delta term reads the
  inserted rows, the data files holding its deleted rows (DuckLake deletions are positional:
  reading the deleted rows scans the files they sit in) and the other sources it joins with:
  ``incr = overhead + sum_s(inserted_s + scanned_s + reach_s * rows of the other sources)``.
  ``reach`` is the part of a joined source the term cannot prune: deleted or updated rows are
  scattered over the key range and prune nothing (``delete_reach``); appended rows carry fresh
  keys, and the semi-join filters on the materialized changes let the scans of the tables
  joined by those keys skip nearly everything (``insert_reach``; what remains is mostly
  dimension tables joined by other columns, read whole).

Auto picks full when ``incr > margin * full``, or when any source changed by more than
``max_fraction`` of its rows. It also rebuilds, and says so, when incremental maintenance is
impossible: no cursors yet, a cursor snapshot that was expired, a source recreated or altered.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from duckstream.plan import IVMPlan
from duckstream.runtime import Connection, run_statements

Strategy = Literal["auto", "incremental", "full"]
STRATEGIES: tuple[str, ...] = ("auto", "incremental", "full")

_REBUILD = "duckstream: rebuild required"
_NO_CURSORS = "no cursors table"


@dataclass(frozen=True)
class Policy:
    """The constants of the cost model (see the module docstring); rows are rows read.

    Calibrated on the TPC-H benchmark in ``bench/`` (SF 0.1 and 1, DuckDB 1.5.5, 2 cores): an
    incremental refresh costs about 40-60 ms before it reads any change (its statements, the
    change copies, the cursor update, the commit), what a recomputation spends on about 2M
    rows; appended keys leave about a tenth of the joined rows to read. Set
    ``overhead_rows=0`` to keep small views incremental regardless of the fixed cost.
    """

    insert_reach: float = 0.1
    delete_reach: float = 1.0
    overhead_rows: int = 2_000_000
    max_fraction: float = 0.10
    margin: float = 1.0


@dataclass(frozen=True)
class SourceEstimate:
    """What the catalog says about one source's changes in the refresh window."""

    source: str
    rows: int  # live rows at the newest snapshot
    inserted: int = 0
    deleted: int = 0
    scanned: int = 0  # rows of the data files that hold the deleted rows

    @property
    def changed(self) -> int:
        return self.inserted + self.deleted

    @property
    def fraction(self) -> float:
        return self.changed / max(self.rows, 1)


@dataclass
class RefreshReport:
    """What one refresh did: the strategy taken, why, the estimate, and how long it took."""

    strategy: str  # "incremental" or "full": what ran
    requested: str  # "auto", "incremental" or "full"
    reason: str
    sources: dict[str, SourceEstimate] = field(default_factory=dict)
    incremental_cost: float | None = None  # estimated rows read by each path
    full_cost: float | None = None
    estimate_seconds: float = 0.0
    elapsed: float = 0.0  # seconds, estimate included

    @property
    def change_rows(self) -> dict[str, int]:
        """Estimated changed rows (inserted + deleted; an update counts twice) per source."""
        return {name: s.changed for name, s in self.sources.items()}


def refresh(
    con: Connection, plan: IVMPlan, strategy: str = "auto", policy: Policy | None = None
) -> RefreshReport:
    """Bring ``plan``'s table up to date with ``strategy`` and report what was done.

    ``incremental`` runs ``plan.maintain`` (errors propagate, e.g. "rebuild required");
    ``full`` runs ``plan.initialize_cursors``; ``auto`` estimates and picks one, and falls back
    to a rebuild when the engine reports that incremental maintenance is impossible.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if plan.dialect != "duckdb" and strategy == "auto":
        strategy = "incremental"  # the estimate reads DuckLake's catalog
    start = time.perf_counter()
    if strategy == "incremental":
        run_statements(con, plan.maintain)
        report = RefreshReport("incremental", strategy, "requested")
    elif strategy == "full":
        run_statements(con, plan.initialize_cursors)
        report = RefreshReport("full", strategy, "requested")
    else:
        report = _auto(con, plan, policy or Policy())
    report.elapsed = time.perf_counter() - start
    return report


def _auto(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    """Estimate inside the refresh's own transaction, then run the chosen statements in it:
    one DuckLake transaction set-up instead of two (each costs catalog round trips), and the
    estimate sees the snapshot the refresh applies."""
    begin = plan.maintain[0]
    shared = begin == plan.initialize_cursors[0] == "BEGIN TRANSACTION"
    if shared:
        con.execute(begin)
    try:
        report = choose(con, plan, policy)
    except Exception:
        if shared:
            con.execute("ROLLBACK")
        raise
    if shared and report.reason.startswith(_NO_CURSORS):  # the failed read ended the transaction
        con.execute("ROLLBACK")
        shared = False
    chosen = plan.maintain if report.strategy == "incremental" else plan.initialize_cursors
    try:
        run_statements(con, chosen[1:] if shared else chosen)
    except Exception as error:
        if report.strategy != "incremental" or _REBUILD not in str(error):
            raise
        report.strategy = "full"  # run_statements rolled the refresh back
        report.reason = str(error).split(_REBUILD + ": ", 1)[-1].splitlines()[0]
        run_statements(con, plan.initialize_cursors)
    return report


# -- the estimate ------------------------------------------------------------------------


def choose(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    """Estimate the window's changes from the catalog and decide; runs nothing else."""
    start = time.perf_counter()
    report = _decide(con, plan, policy)
    report.estimate_seconds = time.perf_counter() - start
    return report


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows(con: Connection, sql: str, params: list[Any] | None = None) -> list[tuple]:
    return con.execute(sql, params or []).fetchall()


def _decide(con: Connection, plan: IVMPlan, policy: Policy) -> RefreshReport:
    mv_name = plan.mv_table.rsplit(".", 1)[-1]
    try:
        cursors = _rows(
            con,
            f"SELECT source_table, table_id, last_snapshot FROM {plan.cursors_table}"
            " WHERE mv_name = ?",
            [mv_name],
        )
    except Exception as error:  # no cursors table: never set up
        return RefreshReport("full", "auto", f"{_NO_CURSORS} ({type(error).__name__})")
    expected = len(plan.base_tables)
    if len({c[0] for c in cursors}) != len(cursors) or (expected and len(cursors) < expected):
        return RefreshReport("full", "auto", "the view has no cursor for every source")
    by_catalog: dict[str, list[tuple[str, int, int]]] = {}
    for source, table_id, cursor in cursors:
        by_catalog.setdefault(source.split(".", 1)[0], []).append((source, table_id, cursor))
    sources: dict[str, SourceEstimate] = {}
    for catalog, entries in by_catalog.items():
        problem = _estimate_catalog(con, catalog, entries, sources)
        if problem:
            return RefreshReport("full", "auto", problem, sources)
    return decide(sources, policy)


def decide(sources: dict[str, SourceEstimate], policy: Policy) -> RefreshReport:
    """The choice for one window, from the estimated changes of every source (engine-free:
    each engine estimates from its own catalog)."""
    changed = {name: s for name, s in sources.items() if s.changed}
    if not changed:
        return RefreshReport("incremental", "auto", "no source changed", sources, 0.0, 0.0)
    full = float(sum(s.rows for s in sources.values()))
    incremental = float(policy.overhead_rows)
    for name, s in changed.items():
        others = sum(o.rows for n, o in sources.items() if n != name)
        reach = policy.delete_reach if s.deleted else policy.insert_reach
        incremental += s.inserted + s.scanned + reach * others
    summary = ", ".join(
        f"{name.rsplit('.', 1)[-1]} +{s.inserted:,}/-{s.deleted:,} ({s.fraction:.2%})"
        for name, s in changed.items()
    )
    biggest = max(changed.values(), key=lambda s: s.fraction)
    if biggest.fraction > policy.max_fraction:
        reason = (
            f"{summary}: {biggest.source} changed more than {policy.max_fraction:.0%} of its rows"
        )
        return RefreshReport("full", "auto", reason, sources, incremental, full)
    ratio = incremental / max(full, 1.0)
    verdict = "full" if ratio > policy.margin else "incremental"
    reason = (
        f"{summary}: incremental reads ~{ratio:.2f}x the rows of a rebuild"
        f" ({incremental:,.0f} with a fixed {policy.overhead_rows:,}, against {full:,.0f})"
    )
    return RefreshReport(verdict, "auto", reason, sources, incremental, full)


def _estimate_catalog(
    con: Connection,
    catalog: str,
    entries: list[tuple[str, int, int]],
    out: dict[str, SourceEstimate],
) -> str | None:
    """Fill ``out`` for the sources of one DuckLake catalog; return a reason to rebuild.

    Four catalog queries whatever the number of sources (end snapshot and live tables, the
    window's snapshots, row counts), plus one per source with deletions or inlined changes.
    """
    meta = _quote(f"__ducklake_metadata_{catalog}")
    tables = _rows(
        con,
        f"SELECT (SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot), t.table_id,"
        f" s.schema_name, t.table_name FROM {meta}.ducklake_table t"
        f" JOIN {meta}.ducklake_schema s USING (schema_id)"
        " WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
    )
    if not tables:
        return f"no live tables in catalog {catalog}"
    end = int(tables[0][0])
    live = {int(t): (schema, name) for _, t, schema, name in tables}
    snapshots = _rows(
        con,
        "SELECT snapshot_id, changes FROM ducklake_snapshots(?) WHERE snapshot_id >= ?",
        [catalog, min(cursor for _, _, cursor in entries)],
    )
    known = {int(s) for s, _ in snapshots}
    windows: dict[int, tuple[str, int, set[str]]] = {}
    for source, table_id, cursor in entries:
        if cursor not in known:
            return f"cursor snapshot {cursor} of {source} was expired"
        _, schema, name = source.split(".", 2)
        if live.get(int(table_id)) != (schema, name):
            return f"source {source} was dropped or recreated"
        touched = {
            kind
            for snapshot_id, changes in snapshots
            if cursor < snapshot_id <= end and changes
            for kind, ids in dict(changes).items()
            if str(table_id) in (ids or [])
        }
        if touched & {"tables_altered", "tables_dropped"}:
            return f"source {source} was altered"
        windows[int(table_id)] = (source, int(cursor), touched)
    counts = _table_counts(con, meta, {t: w[1] for t, w in windows.items()}, end)
    inlined = {t: w[1] for t, w in windows.items() if w[2] & {"inlined_insert", "inlined_delete"}}
    for table_id, (ins, dels) in _inlined_counts(con, meta, inlined, end).items():
        counts[table_id][1] += ins
        counts[table_id][2] += dels
    for table_id, (source, cursor, touched) in windows.items():
        rows, inserted, deleted, scanned = counts[table_id]
        if not touched:
            inserted = deleted = scanned = 0
        if "tables_deleted_from" in touched or "inlined_delete" in touched:
            _, schema, name = source.split(".", 2)
            more = _deletions(con, meta, (catalog, schema, name), table_id, cursor, end, touched)
            deleted, scanned = deleted + more[0], scanned + more[1]
        out[source] = SourceEstimate(source, rows, inserted, deleted, scanned)
    return None


def _table_counts(
    con: Connection, meta: str, cursors: dict[int, int], end: int
) -> dict[int, list[int]]:
    """Per table: [live rows in data files, rows of data files added in ``(cursor, end]``,
    rows of data files dropped whole in it (deleted), the same again (rows scanned)]."""
    window = ", ".join(f"({int(t)}, {int(c)})" for t, c in cursors.items())
    ids = ", ".join(str(int(t)) for t in cursors)
    result = {t: [0, 0, 0, 0] for t in cursors}
    for table_id, live_rows, inserted, dropped in _rows(
        con,
        f"WITH w(table_id, cursor_snapshot) AS (VALUES {window}),"
        " f AS (SELECT f.table_id,"
        "   sum(f.record_count) FILTER (WHERE f.end_snapshot IS NULL) AS live,"
        "   sum(f.record_count) FILTER (WHERE f.begin_snapshot > w.cursor_snapshot"
        f"     AND f.begin_snapshot <= {end}) AS inserted,"
        "   sum(f.record_count) FILTER (WHERE f.begin_snapshot <= w.cursor_snapshot"
        f"     AND f.end_snapshot > w.cursor_snapshot AND f.end_snapshot <= {end}) AS dropped"
        f"   FROM {meta}.ducklake_data_file f JOIN w USING (table_id) GROUP BY f.table_id),"
        " d AS (SELECT table_id, sum(delete_count) AS deleted"
        f"   FROM {meta}.ducklake_delete_file"
        f"   WHERE end_snapshot IS NULL AND table_id IN ({ids}) GROUP BY table_id)"
        " SELECT w.table_id, coalesce(f.live, 0) - coalesce(d.deleted, 0),"
        " coalesce(f.inserted, 0), coalesce(f.dropped, 0)"
        " FROM w LEFT JOIN f USING (table_id) LEFT JOIN d USING (table_id)",
    ):
        result[int(table_id)] = [int(live_rows), int(inserted), int(dropped), int(dropped)]
    return result


def _inlined_counts(
    con: Connection, meta: str, cursors: dict[int, int], end: int
) -> dict[int, tuple[int, int]]:
    """Per table with inlined changes in the window: (rows inserted, rows deleted) inline.

    Live inlined rows of other tables are left out of the row counts: inlining holds only
    small inserts, until they are flushed to a data file.
    """
    if not cursors:
        return {}
    ids = ", ".join(str(int(t)) for t in cursors)
    names = _rows(
        con,
        f"SELECT table_id, table_name FROM {meta}.ducklake_inlined_data_tables"
        f" WHERE table_id IN ({ids})",
    )
    result = {t: (0, 0) for t in cursors}
    if not names:
        return result
    parts = [
        f"SELECT {int(t)} AS table_id,"
        f" count(*) FILTER (WHERE begin_snapshot > {int(cursors[int(t)])}"
        f"   AND begin_snapshot <= {end}),"
        f" count(*) FILTER (WHERE end_snapshot > {int(cursors[int(t)])}"
        f"   AND end_snapshot <= {end})"
        f" FROM {meta}.{_quote(name)}"
        for t, name in names
    ]
    for table_id, inserted, deleted in _rows(con, " UNION ALL ".join(parts)):
        before = result[int(table_id)]
        result[int(table_id)] = (before[0] + int(inserted), before[1] + int(deleted))
    return result


def _deletions(
    con: Connection,
    meta: str,
    where: tuple[str, str, str],
    table_id: int,
    cursor: int,
    end: int,
    touched: set[str],
) -> tuple[int, int]:
    """Rows deleted from data files in ``(cursor, end]``, and rows of the files they sit in.

    Per data file: the delete file valid at the end against the one valid at the cursor. A
    "partial" delete file keeps the deletions of several snapshots with their snapshot ids:
    the window's rows are counted in it (a small, positions-only file).
    """
    deleted = scanned = 0
    valid = "begin_snapshot <= ? AND (end_snapshot IS NULL OR end_snapshot > ?)"
    files: list[tuple] = []
    if "tables_deleted_from" in touched:
        files = _rows(
            con,
            "WITH e AS (SELECT data_file_id, delete_count, partial_max, path, begin_snapshot"
            f" FROM {meta}.ducklake_delete_file WHERE table_id = ? AND {valid}),"
            f" c AS (SELECT data_file_id, delete_count FROM {meta}.ducklake_delete_file"
            f" WHERE table_id = ? AND {valid})"
            " SELECT e.delete_count - coalesce(c.delete_count, 0), e.partial_max, e.path,"
            " e.begin_snapshot, f.record_count"
            f" FROM e LEFT JOIN c USING (data_file_id) JOIN {meta}.ducklake_data_file f"
            " USING (data_file_id)"
            " WHERE e.begin_snapshot > ? OR (e.partial_max IS NOT NULL AND e.partial_max > ?)",
            [table_id, end, end, table_id, cursor, cursor, cursor, cursor],
        )
    for count, partial_max, path, begin, file_rows in files:
        n = int(count)
        if partial_max is not None and int(begin) <= cursor:
            n = _partial_deletes(con, where, path, cursor, end, fallback=n)
        deleted += n
        scanned += int(file_rows) if n else 0
    if "inlined_delete" not in touched:
        return deleted, scanned
    inlined_deletes = _quote(f"ducklake_inlined_delete_{table_id}")
    try:
        ins_del, files_hit = _rows(
            con,
            "SELECT count(*), (SELECT coalesce(sum(record_count), 0)"
            f" FROM {meta}.ducklake_data_file WHERE data_file_id IN (SELECT file_id"
            f" FROM {meta}.{inlined_deletes} WHERE begin_snapshot > ? AND begin_snapshot <= ?))"
            f" FROM {meta}.{inlined_deletes} WHERE begin_snapshot > ? AND begin_snapshot <= ?",
            [cursor, end, cursor, end],
        )[0]
    except Exception:  # the table exists once a deletion from a data file was inlined
        ins_del, files_hit = 0, 0
    return deleted + int(ins_del), scanned + int(files_hit)


def _partial_deletes(
    con: Connection, where: tuple[str, str, str], path: str, cursor: int, end: int, fallback: int
) -> int:
    """Rows of a partial delete file deleted in ``(cursor, end]``, from its snapshot column."""
    catalog, schema, name = where
    try:
        resolved = [
            str(row[0])
            for row in _rows(
                con,
                "SELECT delete_file FROM ducklake_list_files(?, ?, schema => ?)"
                " WHERE delete_file IS NOT NULL",
                [catalog, name, schema],
            )
            if str(row[0]).endswith(path)
        ]
        if not resolved:
            return fallback
        return int(
            _rows(
                con,
                "SELECT count(*) FROM read_parquet(?) WHERE _ducklake_internal_snapshot_id > ?"
                " AND _ducklake_internal_snapshot_id <= ?",
                [resolved[0], cursor, end],
            )[0][0]
        )
    except Exception:  # an unexpected layout: the file's whole count over-estimates, safely
        return fallback
