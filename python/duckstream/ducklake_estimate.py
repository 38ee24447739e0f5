"""Estimate a refresh window's changes from a DuckLake catalog, without reading a changed row.

``estimate(con, plan)`` returns one :class:`~duckstream.cost.SourceEstimate` per source --
live rows, rows inserted and deleted since its cursor, rows of the data files holding the
deletions -- or the reason incremental maintenance is impossible (no cursors, a cursor
snapshot expired, a source dropped, recreated or altered).

Everything comes from the catalog's metadata tables (``__ducklake_metadata_<catalog>``:
snapshots and their changes, data files, delete files), which are plain tables and cheap to
read, joined with the view's cursors (kept in the same metadata, by the snapshot its last
refresh committed: :mod:`duckstream.ducklake_cursors`) in **one query**: every DuckLake
statement costs catalog round trips, and ``auto`` pays for this estimate on every refresh.
Only rarer layouts cost more queries: inlined rows (small inserts kept inside the catalog)
and "partial" delete files (deletions of several snapshots in one file, counted by their
snapshot column).

>>> _table_kinds("inserted_into_table:1,inlined_insert:12,created_table:\\"main\\".\\"t\\"", 12)
['inlined_insert']
"""

from __future__ import annotations

from typing import Any

from duckstream import ducklake_cursors
from duckstream.cost import SourceEstimate
from duckstream.plan import IVMPlan
from duckstream.runtime import Connection

NO_CURSORS = "no cursors recorded (the view was never built)"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _rows(con: Connection, sql: str, params: list[Any] | None = None) -> list[tuple]:
    return con.execute(sql, params or []).fetchall()


def _table_kinds(changes_made: str, table_id: int) -> list[str]:
    """The kinds of change (``inserted_into_table``, ``deleted_from_table``, ...) a snapshot's
    ``changes_made`` lists for ``table_id``."""
    kinds = set()
    for item in changes_made.split(","):
        kind, _, target = item.partition(":")
        if target == str(table_id):
            kinds.add(kind)
    return sorted(kinds)


def estimate(con: Connection, plan: IVMPlan) -> dict[str, SourceEstimate] | str:
    """Per source of ``plan``, what its window holds; or why it must be rebuilt."""
    catalogs = sorted(set(plan.base_tables.values()))
    found = _rows(con, _window_query(plan, catalogs))
    expected = len(plan.base_tables)
    names = [row[0] for row in found]
    if expected and not names:
        return NO_CURSORS
    if len(set(names)) != len(names) or (expected and len(names) < expected):
        return "the view has no cursor for every source"
    sources: dict[str, SourceEstimate] = {}
    for row in found:
        (source, table_id, cursor, end, cursor_exists, live_schema, live_name, changes) = row[:8]
        live_rows, inserted, dropped, deleted, scanned, partial = (int(v or 0) for v in row[8:])
        catalog, schema, name = source.split(".", 2)
        if not cursor_exists:
            return f"cursor snapshot {cursor} of {source} was expired"
        if (live_schema, live_name) != (schema, name):
            return f"source {source} was dropped or recreated"
        touched = set(_table_kinds(changes or "", int(table_id)))
        if touched & {"altered_table", "dropped_table"}:
            return f"source {source} was altered"
        if not touched:
            sources[source] = SourceEstimate(source, live_rows)
            continue
        if "deleted_from_table" not in touched:
            deleted = scanned = 0
        elif partial:  # a delete file shared with snapshots before the cursor: count exactly
            deleted, scanned = _partial_deletions(
                con, (catalog, schema, name), int(table_id), int(cursor), int(end)
            )
        if touched & {"inlined_insert", "inlined_delete"}:
            more = _inlined(con, catalog, int(table_id), int(cursor), int(end), touched)
            inserted, deleted, scanned = (
                inserted + more[0],
                deleted + more[1],
                scanned + more[2],
            )
            live_rows += more[3]
        sources[source] = SourceEstimate(source, live_rows, inserted, dropped + deleted, scanned)
    return sources


def _window_query(plan: IVMPlan, catalogs: list[str]) -> str:
    """One row per cursor of the view: the cursor, the catalog's newest snapshot, whether the
    cursor's snapshot still exists, the table's live name, the window's ``changes_made``, and
    the row counts (live, inserted in new data files, in data files dropped whole, deleted by
    delete files, rows of the files those deletions hit, whether a partial delete file needs
    an exact count)."""
    mv_meta = _quote(f"__ducklake_metadata_{plan.mv_table.split('.', 1)[0]}")
    recorded = ducklake_cursors.latest(f"{mv_meta}.ducklake_snapshot_changes", plan.mv_table)
    ctes = [f"_c AS MATERIALIZED ({recorded})"]
    selects = []
    for k, catalog in enumerate(catalogs):
        meta = _quote(f"__ducklake_metadata_{catalog}")
        w, e, c = f"_w{k}", f"_e{k}", f"_d{k}"
        ctes += [
            f"{w} AS MATERIALIZED (SELECT c.source_table, c.table_id, c.last_snapshot AS cur,"
            f" (SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot) AS fin FROM _c AS c"
            f" WHERE split_part(c.source_table, '.', 1) = {_lit(catalog)})",
            # delete files valid at the end of the window, and at its start
            f"{e} AS (SELECT d.* FROM {meta}.ducklake_delete_file AS d JOIN {w} AS w"
            " USING (table_id) WHERE d.begin_snapshot <= w.fin"
            " AND (d.end_snapshot IS NULL OR d.end_snapshot > w.fin))",
            f"{c} AS (SELECT d.* FROM {meta}.ducklake_delete_file AS d JOIN {w} AS w"
            " USING (table_id) WHERE d.begin_snapshot <= w.cur"
            " AND (d.end_snapshot IS NULL OR d.end_snapshot > w.cur))",
        ]
        selects.append(
            "SELECT w.source_table, w.table_id, w.cur, w.fin, s.snapshot_id IS NOT NULL,"
            " live.schema_name, live.table_name, changes.made,"
            " coalesce(files.live, 0) - coalesce(dead.deleted, 0), files.inserted, files.dropped,"
            " dels.deleted, dels.scanned, dels.partial"
            f" FROM {w} AS w"
            f" LEFT JOIN {meta}.ducklake_snapshot AS s ON s.snapshot_id = w.cur"
            f" LEFT JOIN (SELECT t.table_id, sc.schema_name, t.table_name"
            f"   FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS sc"
            "   ON t.schema_id = sc.schema_id"
            "   WHERE t.end_snapshot IS NULL AND sc.end_snapshot IS NULL) AS live"
            " ON live.table_id = w.table_id"
            " LEFT JOIN (SELECT w.table_id, string_agg(x.changes_made, ',') AS made"
            f"   FROM {w} AS w JOIN {meta}.ducklake_snapshot_changes AS x"
            "   ON x.snapshot_id > w.cur AND x.snapshot_id <= w.fin"
            "   GROUP BY w.table_id) AS changes ON changes.table_id = w.table_id"
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
        )
    return f"WITH {', '.join(ctes)} {' UNION ALL '.join(selects)}"


def _partial_deletions(
    con: Connection, where: tuple[str, str, str], table_id: int, cursor: int, end: int
) -> tuple[int, int]:
    """Rows deleted from data files in ``(cursor, end]``, and rows of the files they sit in,
    per data file: the delete file valid at the end against the one valid at the cursor; a
    "partial" delete file keeps the deletions of several snapshots with their snapshot ids,
    so the window's rows are counted in it (a small, positions-only file)."""
    meta = _quote(f"__ducklake_metadata_{where[0]}")
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
    con: Connection, catalog: str, table_id: int, cursor: int, end: int, touched: set[str]
) -> tuple[int, int, int, int]:
    """Rows inserted and deleted inline in ``(cursor, end]`` (small changes kept in the
    catalog until flushed to a data file), rows of the data files whose deletions were
    inlined, and live inlined rows at ``end`` (a small table may live in the catalog whole).
    Live inlined rows of sources whose window touched no inlined data are not counted:
    inlining holds only small inserts."""
    meta = _quote(f"__ducklake_metadata_{catalog}")
    inserted = deleted = scanned = live = 0
    names = _rows(
        con,
        f"SELECT table_name FROM {meta}.ducklake_inlined_data_tables WHERE table_id = ?",
        [table_id],
    )
    if names:
        parts = [
            f"SELECT count(*) FILTER (WHERE begin_snapshot > {cursor} AND begin_snapshot <= {end})"
            f" AS i, count(*) FILTER (WHERE end_snapshot > {cursor} AND end_snapshot <= {end})"
            f" AS d, count(*) FILTER (WHERE begin_snapshot <= {end}"
            f" AND (end_snapshot IS NULL OR end_snapshot > {end})) AS l"
            f" FROM {meta}.{_quote(str(name))}"
            for (name,) in names
        ]
        inserted, deleted, live = (
            int(v or 0)
            for v in _rows(
                con, f"SELECT sum(i), sum(d), sum(l) FROM ({' UNION ALL '.join(parts)})"
            )[0]
        )
    if "inlined_delete" not in touched:
        return inserted, deleted, scanned, live
    inlined_deletes = _quote(f"ducklake_inlined_delete_{table_id}")
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
