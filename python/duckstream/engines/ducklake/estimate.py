"""Estimate a refresh window's changes from a DuckLake catalog, without reading a changed row.

``estimate(con, plan)`` returns one :class:`~duckstream.strategy.SourceEstimate` per source --
live rows, rows inserted and deleted since its cursor, rows of the data files holding the
deletions -- or the reason incremental maintenance is impossible (no cursors, a cursor
snapshot expired, a source dropped, recreated or altered); ``choose(con, plan, policy)`` decides
on it (``strategy='auto'``), then again on the view's own measured refreshes, as
:func:`duckstream.engines.iceberg.estimate.choose` does on Iceberg.

The window itself (cursors, end snapshots, which kinds of change each source saw, and the
checks that make a rebuild necessary) is the refresh's own: :mod:`.window`
reads it once and ``auto`` estimates from it. The row counts come from the catalog's file
lists (``__ducklake_metadata_<catalog>``: data files, delete files), plain tables cheap to
read, in **one plain query** with the window's bounds as literals: ``auto`` pays for this
estimate on every refresh, and DuckDB plans a simple query fast. Only rarer layouts cost more
queries: inlined rows (small inserts kept inside the catalog) and "partial" delete files
(deletions of several snapshots in one file, counted by their snapshot column).
"""

from __future__ import annotations

import time
from typing import Any

from duckstream.connection import Connection
from duckstream.connection import literal as _lit
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.names import quote
from duckstream.engines.ducklake.profile import _phase
from duckstream.errors import RebuildRequired
from duckstream.plan import IVMPlan
from duckstream.strategy import Policy, RefreshReport, SourceEstimate, calibrate, decide


def _rows(con: Connection, sql: str, params: list[Any] | None = None) -> list[tuple]:
    return con.execute(sql, params or []).fetchall()


def estimate(
    con: Connection, plan: IVMPlan, window: ducklake_window.Window | None = None
) -> dict[str, SourceEstimate] | str:
    """Per source of ``plan``, what its window holds; or why it must be rebuilt.

    ``window``: the refresh's pinned window (:mod:`duckstream.engines.ducklake.window`), which has
    checked the cursors already; read here when not given."""
    if window is None:
        try:
            window = ducklake_window.read(con, ducklake_window.spec_of(plan.steps["maintain"]))
        except RebuildRequired as error:
            return error.reason
    sources: dict[str, SourceEstimate] = {}
    if not window.sources:
        return sources
    counts = {row[0]: row[1:] for row in _rows(con, _counts_query(window))}
    for source, (table_id, cursor, end) in window.sources.items():
        found = counts.get(source, (0,) * 6 + (None,))
        live_rows, inserted, dropped, deleted, scanned, partial = (int(v or 0) for v in found[:6])
        inlined_tables = [str(name) for name in found[6] or []]
        touched = window.kinds[source]
        if not touched:
            sources[source] = SourceEstimate(source, live_rows)
            continue
        catalog, schema, name = source.split(".", 2)
        if "deleted_from_table" not in touched:
            deleted = scanned = 0
        elif partial:  # a delete file shared with snapshots before the cursor: count exactly
            where = (catalog, schema, name)
            deleted, scanned = _partial_deletions(con, where, table_id, cursor, end)
        if touched & {"inlined_insert", "inlined_delete"}:
            more = _inlined(con, catalog, table_id, cursor, end, touched, inlined_tables)
            inserted, deleted, scanned = (
                inserted + more[0],
                deleted + more[1],
                scanned + more[2],
            )
            live_rows += more[3]
        sources[source] = SourceEstimate(source, live_rows, inserted, dropped + deleted, scanned)
    return sources


def _counts_query(window: ducklake_window.Window) -> str:
    """One row per source: its row counts (live, inserted in new data files, in data files
    dropped whole, deleted by delete files, rows of the files those deletions hit, whether a
    partial delete file needs an exact count), from the catalog's file lists; and the names
    of its inlined data tables (a list; NULL: none)."""
    by_catalog: dict[str, list[str]] = {}
    for source, (table_id, cursor, end) in window.sources.items():
        by_catalog.setdefault(source.split(".", 1)[0], []).append(
            f"({_lit(source)}, {table_id}, {cursor}, {end})"
        )
    ctes, selects = [], []
    for k, (catalog, values) in enumerate(sorted(by_catalog.items())):
        meta = ducklake_cursors.metadata_database(catalog)
        w, e, c = f"_w{k}", f"_e{k}", f"_d{k}"
        ctes += [
            f"{w} AS (SELECT * FROM (VALUES {', '.join(values)})"
            " AS w(source_table, table_id, cur, fin))",
            # delete files valid at the end of the window, and at its start
            f"{e} AS (SELECT d.* FROM {meta}.ducklake_delete_file AS d JOIN {w} AS w"
            " USING (table_id) WHERE d.begin_snapshot <= w.fin"
            " AND (d.end_snapshot IS NULL OR d.end_snapshot > w.fin))",
            f"{c} AS (SELECT d.* FROM {meta}.ducklake_delete_file AS d JOIN {w} AS w"
            " USING (table_id) WHERE d.begin_snapshot <= w.cur"
            " AND (d.end_snapshot IS NULL OR d.end_snapshot > w.cur))",
        ]
        selects.append(
            "SELECT w.source_table,"
            " coalesce(files.live, 0) - coalesce(dead.deleted, 0), files.inserted, files.dropped,"
            " dels.deleted, dels.scanned, dels.partial, inl.names"
            f" FROM {w} AS w"
            " LEFT JOIN (SELECT f.table_id,"
            "   sum(f.record_count) FILTER (WHERE f.end_snapshot IS NULL) AS live,"
            "   sum(f.record_count) FILTER (WHERE f.begin_snapshot > w.cur"
            "     AND f.begin_snapshot <= w.fin) AS inserted,"
            "   sum(f.record_count) FILTER (WHERE f.begin_snapshot <= w.cur"
            "     AND f.end_snapshot > w.cur AND f.end_snapshot <= w.fin) AS dropped"
            f"   FROM {meta}.ducklake_data_file AS f JOIN {w} AS w USING (table_id)"
            "   GROUP BY f.table_id) AS files ON files.table_id = w.table_id"
            " LEFT JOIN (SELECT table_id, sum(delete_count) AS deleted"
            f"   FROM {meta}.ducklake_delete_file WHERE end_snapshot IS NULL"
            "   GROUP BY table_id) AS dead ON dead.table_id = w.table_id"
            " LEFT JOIN (SELECT e.table_id,"
            "   sum(e.delete_count - coalesce(c.delete_count, 0)) AS deleted,"
            "   sum(f.record_count) FILTER (WHERE e.delete_count > coalesce(c.delete_count, 0))"
            "     AS scanned,"
            "   CAST(bool_or(e.partial_max IS NOT NULL AND e.begin_snapshot <= w.cur) AS INT)"
            "     AS partial"
            f"   FROM {e} AS e LEFT JOIN {c} AS c USING (table_id, data_file_id)"
            f"   JOIN {meta}.ducklake_data_file AS f USING (data_file_id)"
            f"   JOIN {w} AS w USING (table_id)"
            "   WHERE e.begin_snapshot > w.cur"
            "     OR (e.partial_max IS NOT NULL AND e.partial_max > w.cur)"
            "   GROUP BY e.table_id) AS dels ON dels.table_id = w.table_id"
            " LEFT JOIN (SELECT table_id, list(table_name ORDER BY table_name) AS names"
            f"   FROM {meta}.ducklake_inlined_data_tables WHERE table_id IN"
            f"   (SELECT table_id FROM {w}) GROUP BY table_id) AS inl"
            " ON inl.table_id = w.table_id"
        )
    return f"WITH {', '.join(ctes)} {' UNION ALL '.join(selects)}"


def _partial_deletions(
    con: Connection, where: tuple[str, str, str], table_id: int, cursor: int, end: int
) -> tuple[int, int]:
    """Rows deleted from data files in ``(cursor, end]``, and rows of the files they sit in,
    per data file: the delete file valid at the end against the one valid at the cursor; a
    "partial" delete file keeps the deletions of several snapshots with their snapshot ids,
    so the window's rows are counted in it (a small, positions-only file)."""
    meta = ducklake_cursors.metadata_database(where[0])
    valid = "begin_snapshot <= ? AND (end_snapshot IS NULL OR end_snapshot > ?)"
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
    deleted = scanned = 0
    for count, partial_max, path, begin, file_rows in files:
        n = int(count)
        if partial_max is not None and int(begin) <= cursor:
            n = _partial_file_count(con, where, path, cursor, end, fallback=n)
        deleted += n
        scanned += int(file_rows) if n else 0
    return deleted, scanned


def _partial_file_count(
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


def _inlined(
    con: Connection,
    catalog: str,
    table_id: int,
    cursor: int,
    end: int,
    touched: frozenset[str],
    names: list[str],
) -> tuple[int, int, int, int]:
    """Rows inserted and deleted inline in ``(cursor, end]`` (small changes kept in the
    catalog until flushed to a data file), rows of the data files whose deletions were
    inlined, and live inlined rows at ``end`` (a small table may live in the catalog whole).
    Live inlined rows of sources whose window touched no inlined data are not counted:
    inlining holds only small inserts. ``names``: the table's inlined data tables (read with
    the file lists' counts)."""
    meta = ducklake_cursors.metadata_database(catalog)
    inserted = deleted = scanned = live = 0
    if names:
        parts = [
            f"SELECT count(*) FILTER (WHERE begin_snapshot > {cursor} AND begin_snapshot <= {end})"
            f" AS i, count(*) FILTER (WHERE end_snapshot > {cursor} AND end_snapshot <= {end})"
            f" AS d, count(*) FILTER (WHERE begin_snapshot <= {end}"
            f" AND (end_snapshot IS NULL OR end_snapshot > {end})) AS l"
            f" FROM {meta}.{quote(name)}"
            for name in names
        ]
        inserted, deleted, live = (
            int(v or 0)
            for v in _rows(
                con, f"SELECT sum(i), sum(d), sum(l) FROM ({' UNION ALL '.join(parts)})"
            )[0]
        )
    if "inlined_delete" not in touched:
        return inserted, deleted, scanned, live
    inlined_deletes = quote(f"ducklake_inlined_delete_{table_id}")
    try:
        from_files, files_hit = _rows(
            con,
            "SELECT count(*), (SELECT coalesce(sum(record_count), 0)"
            f" FROM {meta}.ducklake_data_file WHERE data_file_id IN (SELECT file_id"
            f" FROM {meta}.{inlined_deletes} WHERE begin_snapshot > ? AND begin_snapshot <= ?))"
            f" FROM {meta}.{inlined_deletes} WHERE begin_snapshot > ? AND begin_snapshot <= ?",
            [cursor, end, cursor, end],
        )[0]
    except Exception:  # the table exists once a deletion from a data file was inlined
        from_files, files_hit = 0, 0
    return inserted, deleted + int(from_files), scanned + int(files_hit), live


def choose(
    con: Connection,
    plan: IVMPlan,
    policy: Policy,
    window: ducklake_window.Window | None = None,
) -> RefreshReport:
    """Estimate the window's changes from the catalog and decide; runs nothing else.
    ``window``: the refresh's pinned window, read here when not given."""
    start = time.perf_counter()
    with _phase(con, "estimate") as counted:
        found = estimate(counted, plan, window)
        if isinstance(found, str):
            report = RefreshReport("full", "auto", found)
        else:
            report = decide(found, policy, plan.maintain_reads, plan.rebuild_reads)
            measured = None if window is None else window.history
            if measured is None:  # not read with the window's cursors
                view = ducklake_window.spec_of(plan.steps["maintain"]).view
                measured = ducklake_cursors.history(counted, view.split(".", 1)[0], view)
            report = calibrate(report, measured, policy)
    if window is not None and window.values.get("clock_moved"):
        moved = (
            f"the clock moved from {window.values['clock_old']} to {window.values['clock']}:"
            " the rows that crossed the view's temporal filters are changes"
        )
        # a view whose only source is the clock: its move is the whole reason
        report.reason = f"{report.reason}; {moved}" if window.sources else moved
    report.estimate_seconds = time.perf_counter() - start
    return report
