"""A DuckLake refresh window pinned by plain SQL: :func:`pin_sql`, for a plan rendered as SQL.

The runner pins a window with two metadata reads it checks in Python
(:mod:`duckstream.engines.ducklake.window`); a plan run as a script (``IVMPlan.maintain``,
``python -m duckstream compile``) pins it with one ``SET VARIABLE`` whose query reads the same
metadata and applies the same rules, failing with ``duckstream: rebuild required: ...`` from
SQL (slower to plan, same result; both are tested against recomputation, and
``tests/test_plan_sql.py`` runs the scripts).
"""

from __future__ import annotations

from duckstream.connection import literal as _lit
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.window import (
    _ITEM,
    ALTER_KINDS,
    CLOCK_VALUES,
    DELETE_KINDS,
    INSERT_KINDS,
    NOW,
    WindowSpec,
)
from duckstream.errors import RebuildRequired

_CURSORS_TYPE = '{"cursors": [{"source": "VARCHAR", "table_id": "BIGINT", "snapshot": "BIGINT"}]}'


def pin_sql(spec: WindowSpec) -> str:
    """The window pin as one plain statement: ``SET VARIABLE <variable> = (SELECT CASE WHEN
    <a rule is broken> THEN error('duckstream: rebuild required: ...') ... ELSE
    struct_pack(<the window>) END ...)``, reading the metadata :func:`read` reads and
    applying :func:`window_from`'s rules (slower to plan than the runner's path, same
    result)."""
    rebuild = _lit(RebuildRequired.PREFIX)
    ends = " UNION ALL ".join(
        f"SELECT {k} AS k, CAST(id AS BIGINT) AS e FROM ducklake_current_snapshot({_lit(c)})"
        for k, c in enumerate(spec.catalogs)
    )
    view_k = spec.catalogs.index(spec.view.split(".", 1)[0])
    newest = ducklake_cursors.newest_query(
        spec.catalogs[view_k], spec.view, until=f"(SELECT e FROM _ivm_ends WHERE k = {view_k})"
    )
    end_fields = [f"end_{k} := e.end_{k}" for k in range(len(spec.catalogs))]
    end_cols = ", ".join(
        f"max(e) FILTER (WHERE k = {k}) AS end_{k}" for k in range(len(spec.catalogs))
    )
    if not spec.sources:  # the window of a view whose only source is the clock (or none)
        value, clock_cte, clock_from = (
            f"struct_pack({', '.join(end_fields)}, changed := false, advance := false)",
            "",
            "",
        )
        if spec.reads_clock:
            fields = ", ".join(
                [*end_fields, "changed := c.moved", "advance := false", *_CLOCK_FIELDS]
            )
            value = (
                f"CASE WHEN c.why IS NOT NULL THEN error({rebuild} || c.why)"
                f" ELSE struct_pack({fields}) END"
            )
            clock_cte = f", _ivm_clock AS MATERIALIZED ({_clock_sql(spec, newest)})"
            clock_from = ", _ivm_clock AS c"
        return (
            f"SET VARIABLE {spec.variable} = (WITH _ivm_ends AS MATERIALIZED ({ends}){clock_cte}"
            f" SELECT {value} FROM (SELECT {end_cols} FROM _ivm_ends) AS e{clock_from})"
        )
    rows = []
    for i, source in enumerate(spec.sources):
        catalog, schema, name = source.split(".", 2)
        k = spec.catalogs.index(catalog)
        meta = ducklake_cursors.metadata_database(catalog)
        end = f"(SELECT e FROM _ivm_ends WHERE k = {k})"

        def within(column: str, end: str = end) -> str:
            return f"{column} > c.cursor AND {column} <= {end}"

        items = (
            "SELECT regexp_extract(item, '^([a-z_]+):', 1) AS kind,"
            " regexp_extract(item, '^[a-z_]+:([^,]*)', 1) AS target FROM (SELECT"
            f" unnest(regexp_extract_all(coalesce(x.changes_made, ''), {_lit(_ITEM.pattern)}))"
            f" AS item FROM {meta}.ducklake_snapshot_changes AS x"
            f" WHERE {within('x.snapshot_id')})"
        )
        rows.append(
            f"SELECT {i} AS n, c.source, c.cursor, c.table_id, {end} - c.cursor AS lag,"
            f" (SELECT max(t.table_id) FROM {meta}.ducklake_schema AS s"
            f" JOIN {meta}.ducklake_table AS t ON t.schema_id = s.schema_id"
            " AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL"
            f" WHERE lower(s.schema_name) = lower({_lit(schema)})"
            f" AND lower(t.table_name) = lower({_lit(name)})) AS now_id,"
            f" EXISTS (SELECT 1 FROM {meta}.ducklake_snapshot AS y"
            f" WHERE y.snapshot_id = c.cursor AND y.snapshot_id <= {end}) AS present,"
            f" coalesce((SELECT list(DISTINCT kind) FROM ({items}) AS z"
            " WHERE target = CAST(c.table_id AS VARCHAR)), []) AS kinds,"
            f" EXISTS (SELECT 1 FROM {meta}.ducklake_data_file AS f"
            f" WHERE f.table_id = c.table_id AND {within('f.begin_snapshot')})"
            " AS added,"
            f" EXISTS (SELECT 1 FROM {meta}.ducklake_data_file AS f"
            f" WHERE f.table_id = c.table_id AND {within('f.end_snapshot')})"
            f" OR EXISTS (SELECT 1 FROM {meta}.ducklake_delete_file AS f"
            f" WHERE f.table_id = c.table_id AND {within('f.begin_snapshot')})"
            " AS removed"
            f" FROM _ivm_cursors AS c WHERE c.source = {_lit(source)}"
        )

    def kinds_in(kinds: frozenset[str]) -> str:
        return "[" + ", ".join(_lit(k) for k in sorted(kinds)) + "]"

    flags = (
        "SELECT *, len(kinds) > 0 OR added OR removed AS changed,"
        f" len(list_filter(kinds, x -> NOT list_contains({kinds_in(DELETE_KINDS)}, x))) > 0"
        " OR added AS inserts,"
        f" len(list_filter(kinds, x -> NOT list_contains({kinds_in(INSERT_KINDS)}, x))) > 0"
        " OR removed AS deletes,"
        f" list_has_any(kinds, {kinds_in(ALTER_KINDS)}) AS altered FROM ("
        + " UNION ALL ".join(rows)
        + ")"
    )
    advance = f"advance := NOT w.changed AND w.lag >= {ducklake_window.ADVANCE_IDLE_CURSORS}"
    fields, columns = [*end_fields, "changed := w.changed", advance], []
    clock_cte, clock_check, clock_from = "", "", ""
    if spec.reads_clock:
        fields = [*end_fields, "changed := w.changed OR c.moved", advance, *_CLOCK_FIELDS]
        clock_cte = f", _ivm_clock AS MATERIALIZED ({_clock_sql(spec, newest)})"
        clock_check = f" WHEN c.why IS NOT NULL THEN error({rebuild} || c.why)"
        clock_from = ", _ivm_clock AS c"
    for i in range(len(spec.sources)):
        for name in ("cursor", "table_id", "changed", "inserts", "deletes"):
            fields.append(f"{name}_{i} := w.{name}_{i}")
            columns.append(f"max({name}) FILTER (WHERE n = {i}) AS {name}_{i}")
    n = len(spec.sources)
    wanted = ", ".join(_lit(s) for s in spec.sources)
    moved = (
        "min(source || ' was renamed, dropped or recreated (table id ' || table_id || ', now '"
        " || coalesce(CAST(now_id AS VARCHAR), 'no table') || ')')"
        " FILTER (WHERE now_id IS DISTINCT FROM table_id)"
    )
    return (
        f"SET VARIABLE {spec.variable} = (WITH _ivm_ends AS MATERIALIZED ({ends}),"
        " _ivm_cursors AS MATERIALIZED (SELECT u.c.source AS source,"
        " u.c.table_id AS table_id, u.c.snapshot AS cursor FROM (SELECT"
        f" unnest(from_json(commit_extra_info, {_lit(_CURSORS_TYPE)}).cursors) AS c"
        f" FROM ({newest})) AS u WHERE u.c.source IN ({wanted})),"
        f" _ivm_window AS MATERIALIZED ({flags}){clock_cte}"
        " SELECT CASE"
        f" WHEN k.n = 0 THEN error({rebuild} || 'no cursors recorded (the view was never"
        " built, or the commit that recorded its cursors was expired)')"
        f" WHEN k.n <> {n} OR k.d <> {n}"
        f" THEN error({rebuild} || 'no single cursor for every source (initialize the view)')"
        " WHEN w.expired IS NOT NULL"
        f" THEN error({rebuild} || 'the cursor snapshot ' || w.expired || ' was expired')"
        " WHEN w.altered IS NOT NULL"
        f" THEN error({rebuild} || 'source ' || w.altered || ' was altered or recreated')"
        f" WHEN w.moved IS NOT NULL THEN error({rebuild} || 'source ' || w.moved){clock_check}"
        f" ELSE struct_pack({', '.join(fields)}) END"
        " FROM (SELECT count(*) AS n, count(DISTINCT source) AS d FROM _ivm_cursors) AS k,"
        f" (SELECT {end_cols} FROM _ivm_ends) AS e,"
        " (SELECT arg_min(cursor || ' of ' || source, source) FILTER (WHERE NOT present)"
        " AS expired,"
        " min(source) FILTER (WHERE altered) AS altered,"
        f" {moved} AS moved, coalesce(bool_or(changed), false) AS changed,"
        " coalesce(max(lag), 0) AS lag,"
        f" {', '.join(columns)} FROM _ivm_window) AS w{clock_from})"
    )


_CLOCK_FIELDS = ["clock := c.n", "clock_old := c.o", "clock_moved := c.moved"]


def _clock_sql(spec: WindowSpec, newest: str) -> str:
    """A one-row query of the clock fields :func:`clock_values` gives (``n``, ``o``,
    ``moved``) and ``why``: the reason a rebuild is required, or NULL."""
    recorded = (
        "(SELECT CAST(json_extract_string(commit_extra_info, '$.clock') AS TIMESTAMPTZ)"
        f" FROM ({newest}))"
    )
    reasons = ["WHEN o IS NULL THEN 'no clock recorded with the view''s cursors'"]
    for kind in spec.clock_rebuilds:
        old, new = CLOCK_VALUES[kind].format("o"), CLOCK_VALUES[kind].format("n")
        reasons.append(
            f"WHEN {old} IS DISTINCT FROM {new} THEN 'the view reads {kind}, which moved from '"
            f" || CAST({old} AS VARCHAR) || ' to ' || CAST({new} AS VARCHAR)"
        )
    moved = " OR ".join(
        f"{CLOCK_VALUES[k].format('o')} IS DISTINCT FROM {CLOCK_VALUES[k].format('n')}"
        for k in spec.clock_filters
    )
    return (
        f"SELECT n, o, coalesce({moved or 'false'}, false) AS moved,"
        f" CASE {' '.join(reasons)} END AS why FROM (SELECT {NOW} AS n, {recorded} AS o)"
    )
