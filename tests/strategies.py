"""Hypothesis strategies: schemas, rows with duplicates and NULLs, views from the supported
grammar, and change cycles (several batches per window, empty windows, rows inserted and
deleted in one window, several tables changing together).

Values come from small domains so that duplicates, group collisions, join partners and
predicate flips are common; shrinking then ends at a few rows and a short view.

Test code (Hypothesis is a dev dependency): it lives beside the tests, imported as
``strategies`` (``tests/`` is on ``sys.path`` through its conftest, for ``tests/spark`` too).
"""

from __future__ import annotations

import datetime
import decimal
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from duckstream.testing.differential import (
    DUCKLAKE_PATH_IDS,
    DUCKLAKE_PATHS,
    UNORDERED_SEPARATOR,
    Column,
    Delete,
    Insert,
    TableSpec,
    Update,
    quote_ident,
    sql_literal,
)


def examples(default: int, deep: int) -> int:
    """Examples per property test: ``DUCKSTREAM_EXAMPLES`` when set, else ``deep`` under
    ``DUCKSTREAM_DEEP=1`` (``make test-deep``), else ``default`` (``make test``). An example
    on real DuckLake catalogs costs far more than the same delta rule checked in memory by
    ``tests/test_operators.py``: the default run proves the rules there, the lake runs fewer."""
    if os.environ.get("DUCKSTREAM_EXAMPLES"):
        return int(os.environ["DUCKSTREAM_EXAMPLES"])
    return deep if os.environ.get("DUCKSTREAM_DEEP") else default


def ducklake_runs(names: Iterable[str]) -> tuple[list[tuple[str, str, Any]], list[str]]:
    """``(name, strategy, schema)`` for each run of a module's fixed scenarios on DuckLake, and
    the runs' ids (``name-path``). Under ``DUCKSTREAM_DEEP=1`` every scenario by every path
    of ``DUCKLAKE_PATHS`` (forced without and with ``schema=``, ``auto``); by default each
    scenario by one path, the paths taken in turn over the sorted names, so each path still
    runs a third of the module's scenarios (the delta rules themselves are checked in memory
    by ``tests/test_operators.py``)."""
    paths = list(zip(DUCKLAKE_PATHS, DUCKLAKE_PATH_IDS, strict=True))
    deep = bool(os.environ.get("DUCKSTREAM_DEEP"))
    runs = [
        (name, path, path_id)
        for i, name in enumerate(sorted(names))
        for j, (path, path_id) in enumerate(paths)
        if deep or j == i % len(paths)
    ]
    return [(name, *path) for name, path, _ in runs], [f"{name}-{pid}" for name, _, pid in runs]


TYPES = ["INTEGER", "DECIMAL(10,2)", "DOUBLE", "VARCHAR", "DATE", "BOOLEAN"]
NUMERIC = {"INTEGER", "DECIMAL(10,2)", "DOUBLE"}

# A join key column every generated table has, so multi-table views always have partners.
KEY = Column("k", "INTEGER")


def values(type_: str, nullable: bool = True) -> st.SearchStrategy:
    base: st.SearchStrategy
    if type_ == "INTEGER":
        base = st.integers(-3, 3)
    elif type_ == "DECIMAL(10,2)":
        base = st.sampled_from(
            [decimal.Decimal(x) for x in ("-1.50", "0.00", "0.25", "2.00", "7.75")]
        )
    elif type_ == "DOUBLE":
        base = st.sampled_from([-2.5, 0.0, 0.5, 1.0, 3.25])
    elif type_ == "VARCHAR":
        base = st.sampled_from(["a", "b", "B", "ab", ""])
    elif type_ == "DATE":
        base = st.sampled_from([datetime.date(2024, 1, d) for d in (1, 2, 3, 15)])
    else:
        base = st.booleans()
    return st.one_of(st.none(), base, base, base) if nullable else base


def rows(columns: list[Column], min_size: int = 0, max_size: int = 8) -> st.SearchStrategy:
    row = st.tuples(*(values(c.type) for c in columns))
    # Draw from a small pool so that duplicate rows are common.
    return st.lists(row, min_size=1, max_size=4).flatmap(
        lambda pool: st.lists(st.sampled_from(pool), min_size=min_size, max_size=max_size)
    )


@st.composite
def tables(draw, count: int = 1) -> list[TableSpec]:
    result = []
    for i in range(count):
        types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=4))
        columns = [KEY] + [Column(f"c{j}", t) for j, t in enumerate(types)]
        result.append(TableSpec(f"t{i}", columns, draw(rows(columns))))
    return result


# -- expressions -------------------------------------------------------------------------
def _columns(tables_: list[TableSpec], qualified: bool) -> list[tuple[str, str]]:
    out = []
    for t in tables_:
        for c in t.columns:
            out.append((f"{t.name}.{c.name}" if qualified else c.name, c.type))
    return out


@st.composite
def predicate(draw, columns: list[tuple[str, str]]) -> str:
    def atom() -> str:
        name, type_ = draw(st.sampled_from(columns))
        choice = draw(st.integers(0, 3))
        if choice == 0:
            return f"{name} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
        value = draw(values(type_, nullable=False))
        if type_ == "BOOLEAN":
            return f"{name} = {sql_literal(value)}"
        op = draw(st.sampled_from(["=", "<>", "<", ">=", ">"]))
        return f"{name} {op} {sql_literal(value)}"

    parts = [atom() for _ in range(draw(st.integers(1, 3)))]
    result = parts[0]
    for part in parts[1:]:
        result = f"({result} {draw(st.sampled_from(['AND', 'OR']))} {part})"
    if draw(st.integers(0, 5)) == 0:
        result = f"NOT ({result})"
    return result


@st.composite
def scalar(draw, columns: list[tuple[str, str]]) -> tuple[str, str]:
    """A projected expression and its type."""
    name, type_ = draw(st.sampled_from(columns))
    choice = draw(st.integers(0, 5))
    if choice == 0 or type_ in ("DATE", "BOOLEAN"):
        return name, type_
    if type_ in NUMERIC:
        if choice == 1:
            return f"{name} * 2 + 1", type_
        if choice == 5:  # DOUBLEs a DECIMAL literal does not give back: DuckLake's inlining
            return f"{name} / 11", "DOUBLE"  # stores 1 / 11 so (0.09090909090909091)
        if choice == 2:
            return f"CASE WHEN {name} > 0 THEN 'pos' WHEN {name} < 0 THEN 'neg' END", "VARCHAR"
        if choice == 3:
            return f"coalesce({name}, 0)", type_
        return f"CAST({name} AS VARCHAR)", "VARCHAR"
    if choice == 1:
        return f"upper({name})", "VARCHAR"
    if choice == 2:
        return f"length({name})", "INTEGER"
    if choice == 3:
        return f"coalesce({name}, '-') || 'x'", "VARCHAR"
    return f"CASE WHEN {name} = 'a' THEN 1 ELSE 0 END", "INTEGER"


AGGREGATES = ["count_star", "count", "sum", "avg", "min", "max", "count_distinct", "filtered"]
SHAPES = ["project", "distinct", "aggregate", "global", "having", "derived"]


@st.composite
def aggregate(draw, columns: list[tuple[str, str]], kind: str | None = None) -> str:
    """An aggregate call; ``kind`` (one of AGGREGATES) forces the function."""
    numeric = [c for c in columns if c[1] in NUMERIC]
    pool = numeric if kind in ("sum", "avg") and numeric else columns
    name, type_ = draw(st.sampled_from(pool))
    calls = {
        "count_star": "count(*)",
        "count": f"count({name})",
        "min": f"min({name})",
        "max": f"max({name})",
        "count_distinct": f"count(DISTINCT {name})",
        "filtered": f"count(*) FILTER (WHERE {name} IS NOT NULL)",
        "sum": f"sum(length(CAST({name} AS VARCHAR)))",
        "avg": f"avg(length(CAST({name} AS VARCHAR)))",
    }
    if type_ in NUMERIC:
        calls |= {"sum": f"sum({name})", "avg": f"avg({name})"}
        calls["mixed"] = f"sum({name}) + count(*)"
    if kind is not None:
        return calls[kind]
    return draw(st.sampled_from(sorted(calls.values())))


@st.composite
def select_list(
    draw, columns, aggregated: bool, kind: str | None = None, min_keys: int = 0
) -> tuple[list[str], list[str]]:
    """Select items and group keys."""
    if not aggregated:
        exprs = [draw(scalar(columns))[0] for _ in range(draw(st.integers(1, 3)))]
        return [f"{e} AS o{i}" for i, e in enumerate(exprs)], []
    keys = [draw(scalar(columns))[0] for _ in range(draw(st.integers(min_keys, 2)))]
    keys = list(dict.fromkeys(keys))
    aggs = [draw(aggregate(columns, kind)) for _ in range(draw(st.integers(1, 2)))]
    if kind is not None and draw(st.booleans()):
        aggs.append(draw(aggregate(columns)))
    items = [f"{k} AS g{i}" for i, k in enumerate(keys)]
    return items + [f"{a} AS a{i}" for i, a in enumerate(aggs)], keys


def _from_clause(draw, tables_: list[TableSpec], outer: bool = False) -> tuple[str, list[str]]:
    """FROM over ``tables_``, joined on ``k`` in a random syntax; join conditions for WHERE.
    With ``outer``, also LEFT / RIGHT / FULL joins (see ``_outer_join``)."""
    if outer:
        return _outer_from_clause(draw, tables_)
    first = tables_[0].name
    from_, conditions = first, []
    for t in tables_[1:]:
        style = draw(st.sampled_from(["on", "comma", "theta"]))
        if style == "on":
            from_ += f" JOIN {t.name} ON {first}.k = {t.name}.k"
        elif style == "comma":
            from_ += f", {t.name}"
            conditions.append(f"{first}.k = {t.name}.k")
        else:
            from_ += f" JOIN {t.name} ON {first}.k <= {t.name}.k + 1"
    return from_, conditions


OUTER_STYLES = ["left", "right", "full", "inner", "cross", "left_aggregate"]


def _outer_from_clause(draw, tables_: list[TableSpec]) -> tuple[str, list[str]]:
    """A left-deep chain of inner and outer joins: ON an equality of ``k`` with an earlier
    table (or a non-equi one), sometimes with a conjunct over one side only; USING for the
    first join; a LEFT JOIN to a per-key aggregate of a table; a comma join only last (a
    comma binds looser than JOIN)."""
    from_, conditions = tables_[0].name, []
    for i, t in enumerate(tables_[1:], start=1):
        earlier = draw(st.sampled_from(tables_[:i]))
        style = draw(st.sampled_from(OUTER_STYLES))
        if style == "cross":
            if i == len(tables_) - 1 and draw(st.booleans()):
                from_ += f", {t.name}"
            else:
                from_ += f" CROSS JOIN {t.name}"
            conditions.append(f"{earlier.name}.k = {t.name}.k")
            continue
        if style == "left_aggregate":
            items = ", ".join(f"max({c.name}) AS {c.name}" for c in t.columns[1:])
            relation = f"(SELECT k, {items} FROM {t.name} GROUP BY k) AS {t.name}"
            from_ += f" LEFT JOIN {relation} ON {earlier.name}.k = {t.name}.k"
            continue
        if i == 1 and draw(st.integers(0, 4)) == 0:
            from_ += f" {style.upper()} JOIN {t.name} USING (k)"
            continue
        on = draw(
            st.sampled_from(
                [f"{earlier.name}.k = {t.name}.k"] * 3 + [f"{earlier.name}.k <= {t.name}.k + 1"]
            )
        )
        extra = draw(st.integers(0, 3))
        if extra == 1:
            on += " AND " + draw(predicate(_columns([t], qualified=True)))
        elif extra == 2:
            on += " AND " + draw(predicate(_columns(tables_[:i], qualified=True)))
        from_ += f" {style.upper()} JOIN {t.name} ON {on}"
    return from_, conditions


@st.composite
def views(
    draw,
    tables_: list[TableSpec],
    shape: str | None = None,
    kind: str | None = None,
    outer: bool = False,
):
    """A view over ``tables_`` (joined on ``k`` when there are several); ``shape`` (one of
    SHAPES, or ``nested``: an aggregate or DISTINCT over the join inside a derived table, as
    in TPC-H Q13) and ``kind`` (one of AGGREGATES) focus it on one construct; ``outer`` lets
    the joins be outer ones."""
    columns = _columns(tables_, qualified=len(tables_) > 1)
    if shape is None:
        shape = "aggregate" if kind else draw(st.sampled_from(SHAPES))
    from_, conditions = _from_clause(draw, tables_, outer)
    if draw(st.booleans()):
        conditions.append(draw(predicate(columns)))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    if shape == "nested":
        return draw(_nested(columns, f"{from_}{where}"))
    if shape == "derived":
        inner_items, _ = draw(select_list(columns, aggregated=False))
        inner = f"SELECT {', '.join(inner_items)} FROM {from_}{where}"
        names = ", ".join(f"o{i}" for i in range(len(inner_items)))
        agg = draw(st.sampled_from(["count(*)", "count(o0)", "min(o0)", "max(o0)"]))
        if draw(st.booleans()):
            return f"SELECT o0, {agg} AS n FROM ({inner}) AS s GROUP BY o0"
        return f"SELECT {names} FROM ({inner}) AS s WHERE o0 IS NOT NULL"
    aggregated = shape in ("aggregate", "global", "having")
    min_keys = 1 if shape == "having" else 0
    items, keys = draw(select_list(columns, aggregated, kind=kind, min_keys=min_keys))
    if shape == "global":
        items, keys = [i for i in items if " AS g" not in i], []
    distinct = "DISTINCT " if shape == "distinct" else ""
    sql = f"SELECT {distinct}{', '.join(items)} FROM {from_}{where}"
    if keys:
        sql += f" GROUP BY {', '.join(keys)}"
    if shape == "having":
        key = columns[0][0]
        having = draw(st.sampled_from(["count(*) > 1", "count(*) = 1", f"min({key}) >= 0"]))
        sql += f" HAVING {having}"
    return sql


@st.composite
def _nested(draw, columns: list[tuple[str, str]], from_where: str) -> str:
    """``SELECT ... FROM (<GROUP BY or DISTINCT over from_where>) AS s ...``: grouped again
    by a count (Q13's shape), or filtered."""
    if draw(st.booleans()):
        items, keys = draw(select_list(columns, aggregated=True, min_keys=1))
        inner = f"SELECT {', '.join(items)} FROM {from_where} GROUP BY {', '.join(keys)}"
        counted = next((i for i in items if i.startswith("count(")), None)
    else:
        items, _ = draw(select_list(columns, aggregated=False))
        inner = f"SELECT DISTINCT {', '.join(items)} FROM {from_where}"
        counted = None
    names = [i.rsplit(" AS ", 1)[1] for i in items]
    if counted is not None and draw(st.booleans()):
        name = counted.rsplit(" AS ", 1)[1]
        return f"SELECT {name}, count(*) AS n FROM ({inner}) AS s GROUP BY {name}"
    where = f" WHERE {draw(st.sampled_from(names))} IS NOT NULL" if draw(st.booleans()) else ""
    return f"SELECT {', '.join(names)} FROM ({inner}) AS s{where}"


# -- changes -----------------------------------------------------------------------------
@st.composite
def change(draw, table: TableSpec):
    kind = draw(st.sampled_from(["insert", "insert", "delete", "update"]))
    if kind == "insert":
        return Insert(table.name, tuple(draw(rows(table.columns, min_size=1, max_size=4))))
    columns = [(draw(spelled(c.name)), c.type) for c in table.columns]
    key = columns[0][0]
    # Mostly hit rows by the small-domain key, so deletes and updates touch the view often.
    where = draw(
        st.one_of(
            st.builds(lambda v: f"{key} = {v}", st.integers(-3, 3)),
            st.builds(lambda v: f"{key} >= {v}", st.integers(-3, 3)),
            st.just(f"{key} IS NULL"),
            predicate(columns),
        )
    )
    if kind == "delete":
        return Delete(table.name, where)
    column = draw(st.sampled_from(table.columns))
    value = draw(values(column.type))
    return Update(table.name, f"{draw(spelled(column.name))} = {sql_literal(value)}", where)


@st.composite
def insert_then_modify(draw, table: TableSpec) -> list:
    """Statements of one transaction that insert rows and then update or delete some of those
    same rows (and maybe older rows with the same key): the snapshot is "inserted only" in
    DuckLake's metadata, yet its feeds hold deletions."""
    key_value = draw(st.integers(-3, 3))
    new_rows = draw(rows(table.columns, min_size=1, max_size=4))
    new_rows = [(key_value, *row[1:]) if draw(st.booleans()) else row for row in new_rows]
    key = draw(spelled(table.columns[0].name))
    statements: list = [Insert(table.name, tuple(new_rows))]
    for _ in range(draw(st.integers(1, 2))):
        where = draw(st.sampled_from([f"{key} = {key_value}", f"{key} >= {key_value}"]))
        if draw(st.booleans()):
            statements.append(Delete(table.name, where))
        else:
            column = draw(st.sampled_from(table.columns))
            value = sql_literal(draw(values(column.type)))
            statements.append(Update(table.name, f"{draw(spelled(column.name))} = {value}", where))
    if draw(st.booleans()):
        statements.append(draw(change(table)))
    return statements


@st.composite
def rework_rows(draw, table: TableSpec) -> list:
    """Statements of one transaction that change the same existing rows several times: updated
    twice by overlapping WHERE clauses (maybe a column no view reads, then one it reads),
    updated then deleted, deleted then inserted again with the same key, or each row of a
    small file changed by a statement of its own. DuckLake lists such rows in its feed with
    their intermediate versions, and some deleted rows twice (issues 30 and 31)."""
    key = draw(spelled(table.columns[0].name))
    keys = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=3, unique=True))

    def where() -> str:
        return draw(
            st.sampled_from(
                [
                    f"{key} = {keys[0]}",
                    f"{key} >= {min(keys)}",
                    f"{key} IN ({', '.join(map(str, keys))})",
                ]
                + [f"{key} = {k}" for k in keys]
            )
        )

    def update() -> Update:
        column = draw(st.sampled_from(table.columns))
        value = sql_literal(draw(values(column.type)))
        return Update(table.name, f"{draw(spelled(column.name))} = {value}", where())

    kind = draw(st.sampled_from(["update_twice", "update_then_delete", "reinsert", "each_row"]))
    if kind == "update_twice":
        statements: list = [update(), update()]
    elif kind == "update_then_delete":
        statements = [update(), Delete(table.name, where())]
    elif kind == "reinsert":
        again = draw(rows(table.columns, min_size=1, max_size=2))
        statements = [Delete(table.name, where())]
        statements.append(Insert(table.name, tuple((keys[0], *row[1:]) for row in again)))
        statements.append(draw(st.sampled_from([update(), Delete(table.name, where())])))
    else:  # every key its own statement, each an update or a delete
        statements = [
            draw(st.sampled_from([Delete(table.name, f"{key} = {k}"), update()])) for k in keys
        ]
        statements += [Delete(table.name, f"{key} IS NULL")] if draw(st.booleans()) else []
    return statements


@st.composite
def column_updates(draw, tables_: list[TableSpec]) -> list:
    """A window of updates to one column of one table only: every other column of the
    touched rows stays, so the change cancels out under any projection that does not read
    that column (a delta netted by the wrong columns loses it; issue 14 item 1)."""
    table = draw(st.sampled_from(tables_))
    column = draw(st.sampled_from(table.columns))
    name = draw(spelled(column.name))
    key = draw(spelled(table.columns[0].name))
    batches = []
    for _ in range(draw(st.integers(1, 3))):
        where = draw(
            st.one_of(
                st.builds(lambda v: f"{key} = {v}", st.integers(-3, 3)),
                st.builds(lambda v: f"{key} >= {v}", st.integers(-3, 3)),
                st.builds(lambda v: f"{name} = {sql_literal(v)}", values(column.type, False)),
            )
        )
        value = sql_literal(draw(values(column.type)))
        batches.append([Update(table.name, f"{name} = {value}", where)])
    return batches


@st.composite
def cycles(
    draw,
    tables_: list[TableSpec],
    max_cycles: int = 4,
    transactions: bool = False,
    several: tuple = (),
) -> list:
    """Change windows: each a list of committed batches touching one or several tables.
    ``transactions``: batches are mostly transactions that change the same rows several times
    (``several``'s strategies, by default :func:`insert_then_modify` and :func:`rework_rows`)."""
    several = several or (insert_then_modify, rework_rows)
    result = []
    for _ in range(draw(st.integers(1, max_cycles))):
        if draw(st.integers(0, 3)) == 0:
            result.append(draw(column_updates(tables_)))
            continue
        batches = []
        for _ in range(draw(st.integers(0, 3))):
            touched = draw(st.lists(st.sampled_from(tables_), min_size=1, max_size=len(tables_)))
            batch = []
            for t in touched:
                for _ in range(draw(st.integers(1, 2))):
                    if transactions and draw(st.integers(0, 2)) > 0:
                        statements = draw(st.sampled_from(several))
                        batch.extend(draw(statements(t)))
                    else:
                        batch.append(draw(change(t)))
            batches.append(batch)
        result.append(batches)
    return result


# -- the widened grammar -----------------------------------------------------------------
# Constructs the generator focuses on one at a time (tests parametrize over them), each with
# the same random schemas, change windows, identifiers and DuckLake inlining around it.
CONSTRUCTS = [
    "mixed_aggregates",  # MIN/MAX + COUNT(DISTINCT) + holistic + algebraic in one view
    "literals",  # integer, string, NULL literals in plain, DISTINCT and grouped select lists
    "cte_chain",  # WITH a AS (...), b AS (SELECT ... FROM a) ...
    "cte_twice",  # one CTE joined with itself
    "derived_aggregate",  # aggregate / DISTINCT in a derived table or CTE, joined or re-grouped
    "nested_twice",  # two levels of derived tables / CTEs
    "self_join",  # one table twice under two aliases
    "identifiers",  # upper-case and quoted table and column names, spelled in any case
    "set_operations",  # UNION [ALL], INTERSECT [ALL], EXCEPT [ALL]: nested, in CTEs, grouped
    "subqueries",  # [NOT] EXISTS, [NOT] IN, scalar aggregates in WHERE, correlated or not
    "windows",  # window functions: ranks, lag/lead, running and partition totals, QUALIFY
    "grouping_sets",  # ROLLUP, CUBE, GROUPING SETS, WITH ROLLUP; GROUPING / GROUPING_ID
    "top_k",  # ORDER BY ... LIMIT / OFFSET and DISTINCT ON, ties included, at any depth
    "shadowed_names",  # select aliases named like input columns, read in WHERE/GROUP BY/HAVING
    "constants",  # VALUES, range / generate_series, FROM-less SELECTs: unioned, joined, grouped
    "lateral",  # unnest / range / generate_series over a row's columns; LATERAL subqueries
    "shared_cte",  # one CTE read twice: self-joined, in a subquery and outside, in a union
    "staged",  # dbt's shape: staging CTEs joined, outer or inner, to a per-key aggregate
]
OUTER_SHAPES = ["project", "distinct", "aggregate", "global", "having"]

# Names for "identifiers": mixed case, reserved words, non-ASCII.
MIXED_TABLES = ["Orders", "MyTable", "Group", "Größe"]
MIXED_KEYS = ["MyKey", "K", "Group"]
MIXED_COLUMNS = ["Größe", "Group", "Amount", "camelCase", "UPPER", "Order"]
RESERVED = {"group", "order", "select"}

LITERALS = [
    ("0", "INTEGER"),
    ("1", "INTEGER"),
    ("5", "INTEGER"),
    ("-1", "INTEGER"),
    ("2.5", "DECIMAL(10,2)"),
    ("'x'", "VARCHAR"),
    ("''", "VARCHAR"),
    ("'it''s'", "VARCHAR"),
    ("TRUE", "BOOLEAN"),
    ("DATE '2024-01-01'", "DATE"),
    ("CAST(NULL AS INTEGER)", "INTEGER"),
    ("CAST(NULL AS VARCHAR)", "VARCHAR"),
]
UNTYPED_NULL = ("NULL", "INTEGER")


def _plain_identifier(name: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None and (
        name.lower() not in RESERVED
    )


@st.composite
def spelled(draw, name: str, exact: bool = False) -> str:
    """A reference to the table or column ``name``: lower-case plain names as they are,
    others quoted exactly, or (when SQL allows and not ``exact``) unquoted in their own, lower
    or upper case."""
    if name == name.lower() and _plain_identifier(name):
        return name
    if exact or not _plain_identifier(name):
        return quote_ident(name)
    return draw(st.sampled_from([name, name.lower(), name.upper(), quote_ident(name)]))


@st.composite
def named_tables(draw, count: int, names: str = "plain") -> list[TableSpec]:
    """``count`` tables, each with a join key first; ``names="mixed"`` draws mixed-case,
    reserved and non-ASCII table and column names (unique case-insensitively)."""
    if names == "plain":
        return draw(tables(count))
    table_names = draw(st.permutations(MIXED_TABLES))[:count]
    result = []
    for name in table_names:
        key = draw(st.sampled_from(MIXED_KEYS))
        others = [c for c in MIXED_COLUMNS if c.lower() != key.lower()]
        picked = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3, unique=True))
        columns = [Column(key, "INTEGER")] + [
            Column(c, draw(st.sampled_from(TYPES))) for c in picked
        ]
        result.append(TableSpec(name, columns, draw(rows(columns))))
    return result


@dataclass
class Relation:
    """An item of a FROM clause: a table, a CTE or a derived table, with its columns."""

    source: str  # the FROM item: `t0`, `t0 AS a`, `(SELECT ...) AS s`, `c1 AS x`
    alias: str  # what its columns are qualified with
    columns: list[tuple[str, str]]  # (reference, type); the join key first


@st.composite
def table_relation(
    draw, table: TableSpec, alias: str | None = None, exact: bool = False
) -> Relation:
    """``exact``: the table named in its own spelling (Iceberg catalogs on Spark match table
    names case-sensitively, so ``FROM orders`` does not find ``Orders`` there)."""
    name = draw(spelled(table.name, exact))
    columns = [(draw(spelled(c.name)), c.type) for c in table.columns]
    return Relation(f"{name} AS {alias}" if alias else name, alias or name, columns)


def _qualified(relations: list[Relation]) -> list[tuple[str, str]]:
    if len(relations) == 1:
        return list(relations[0].columns)
    return [(f"{r.alias}.{ref}", t) for r in relations for ref, t in r.columns]


@st.composite
def _joined(draw, relations: list[Relation]) -> tuple[str, list[str]]:
    """FROM over ``relations`` joined on their keys in a random syntax; WHERE conditions."""
    first = relations[0]
    key = f"{first.alias}.{first.columns[0][0]}"
    from_, conditions = first.source, []
    for r in relations[1:]:
        other = f"{r.alias}.{r.columns[0][0]}"
        style = draw(st.sampled_from(["on", "comma", "theta"]))
        if style == "on":
            from_ += f" JOIN {r.source} ON {key} = {other}"
        elif style == "comma":
            from_ += f", {r.source}"
            conditions.append(f"{key} = {other}")
        else:
            from_ += f" JOIN {r.source} ON {key} <= {other} + 1"
    return from_, conditions


@st.composite
def literal(draw, portable: bool = False) -> tuple[str, str]:
    """A literal and its type; Spark cannot store a column of type NULL: typed NULLs only."""
    return draw(st.sampled_from(LITERALS if portable else [*LITERALS, UNTYPED_NULL]))


@st.composite
def typed_aggregate(draw, columns: list[tuple[str, str]], kind: str) -> tuple[str, str]:
    """An aggregate call of ``kind`` and its result type (approximately: for predicates)."""
    numeric = [c for c in columns if c[1] in NUMERIC]
    name, type_ = draw(st.sampled_from(numeric if kind in ("sum", "avg", "median") else columns))
    if kind in ("sum", "avg", "median") and type_ not in NUMERIC:
        name, type_ = f"length(CAST({name} AS VARCHAR))", "INTEGER"
    text = f"CAST({name} AS VARCHAR)"
    return {
        "count_star": ("count(*)", "INTEGER"),
        "count": (f"count({name})", "INTEGER"),
        "count_distinct": (f"count(DISTINCT {name})", "INTEGER"),
        "min": (f"min({name})", type_),
        "max": (f"max({name})", type_),
        "sum": (f"sum({name})", type_),
        "avg": (f"avg({name})", "DOUBLE"),
        "median": (f"median({name})", "DOUBLE"),
        "string_agg": (f"string_agg({text}, ',' ORDER BY {text})", "VARCHAR"),
        "string_agg_unordered": (f"string_agg({text}, '{UNORDERED_SEPARATOR}')", "VARCHAR"),
    }[kind]


@st.composite
def aggregate_mix(
    draw, columns, portable: bool = False, nested: bool = False
) -> list[tuple[str, str]]:
    """Several aggregate kinds in one select list: an extreme (MIN/MAX), a COUNT(DISTINCT),
    and often holistic (median, string_agg) and algebraic ones, in any order. ``nested``: the
    results are read by an outer query, so no unordered string_agg (its value is arbitrary)."""
    holistic = ["median", "count_distinct"]
    if not portable:  # Spark 3.5 has no string_agg / LISTAGG
        holistic += ["string_agg"] if nested else ["string_agg", "string_agg_unordered"]
    algebraic = ["sum", "avg", "count", "count_star"]
    # an extreme and a COUNT(DISTINCT) always; holistic and algebraic ones often (a holistic
    # one makes the group rescan, which hides the extreme's bookkeeping: vary it)
    kinds = [draw(st.sampled_from(["min", "max"])), "count_distinct"]
    kinds += draw(st.lists(st.sampled_from(["min", "max", *holistic, *algebraic]), max_size=3))
    return [draw(typed_aggregate(columns, k)) for k in draw(st.permutations(kinds))]


@dataclass
class Options:
    """What a select list may contain beyond the basic grammar."""

    literals: bool = False  # literal items
    mix: bool = False  # several aggregate kinds together
    bare: bool = False  # unaliased column references (output names from the columns)
    portable: bool = False  # only what DuckDB and Spark both support
    nested: bool = False  # read by an outer query: only deterministic values


@st.composite
def select_items(
    draw, columns, shape: str, options: Options, prefix: str = "o"
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Select items, GROUP BY keys and output (name, type) for ``shape``."""
    items: list[tuple[str, str, str]] = []  # (expression, output name, type)
    keys: list[str] = []
    used: set[str] = set()

    def add(expr: str, type_: str, bare_name: str | None = None) -> None:
        if bare_name is not None and bare_name.lower() not in used and draw(st.booleans()):
            used.add(bare_name.lower())
            items.append((expr, "", type_))
            return
        name = f"{prefix}{len(items)}"
        used.add(name)
        items.append((expr, name, type_))

    def bare(ref: str) -> str | None:
        return ref.split(".")[-1] if options.bare else None

    def item() -> tuple[str, str]:
        if options.bare and draw(st.booleans()):
            return draw(st.sampled_from(columns))
        return draw(scalar(columns))

    if shape in ("project", "distinct"):
        for _ in range(draw(st.integers(1, 3))):
            expr, type_ = item()
            add(expr, type_, bare(expr) if expr in {c[0] for c in columns} else None)
    else:
        if shape != "global":
            for _ in range(draw(st.integers(1 if shape == "having" else 0, 2))):
                expr, type_ = item()
                if expr not in keys:
                    keys.append(expr)
                    add(expr, type_, bare(expr) if expr in {c[0] for c in columns} else None)
        if options.mix:
            aggs = draw(aggregate_mix(columns, options.portable, options.nested))
        else:
            kinds = ["count_star", "count", "sum", "avg", "min", "max", "count_distinct"]
            aggs = [
                draw(typed_aggregate(columns, draw(st.sampled_from(kinds))))
                for _ in range(draw(st.integers(1, 2)))
            ]
        for expr, type_ in aggs:
            add(expr, type_)
    if options.literals:
        for _ in range(draw(st.integers(1, 2))):
            at = draw(st.integers(0, len(items)))
            name = f"{prefix}l{at}_{len(items)}"
            value, type_ = draw(literal(options.portable))
            items.insert(at, (value, name, type_))
    rendered = [f"{e} AS {n}" if n else e for e, n, _ in items]
    outputs = [(n or e.split(".")[-1], t) for e, n, t in items]
    return rendered, keys, outputs


@st.composite
def select(
    draw, relations: list[Relation], shape: str, options: Options, prefix: str = "o"
) -> tuple[str, list[tuple[str, str]]]:
    """``SELECT`` of ``shape`` over ``relations`` (joined on their keys); its SQL and its
    output columns."""
    columns = _qualified(relations)
    from_, conditions = draw(_joined(relations))
    if draw(st.booleans()):
        conditions.append(draw(predicate(columns)))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    items, keys, outputs = draw(select_items(columns, shape, options, prefix))
    distinct = "DISTINCT " if shape == "distinct" else ""
    sql = f"SELECT {distinct}{', '.join(items)} FROM {from_}{where}"
    if keys:
        sql += f" GROUP BY {', '.join(keys)}"
    if shape == "having":
        key = columns[0][0]
        having = draw(st.sampled_from(["count(*) > 1", "count(*) = 1", f"min({key}) >= 0"]))
        sql += f" HAVING {having}"
    return sql, outputs


@st.composite
def subquery(
    draw, relation: Relation, kind: str, options: Options, prefix: str = "x"
) -> tuple[str, list]:
    """A SELECT over one relation that keeps its key as ``k`` (so it can be joined on):
    ``kind`` is project, distinct or aggregate (grouped by the key); its other outputs are
    named ``prefix`` and a number."""
    columns = relation.columns
    key = columns[0][0]
    where = f" WHERE {draw(predicate(columns))}" if draw(st.booleans()) else ""
    inner = Options(
        literals=options.literals, mix=options.mix, portable=options.portable, nested=True
    )
    shape = "project" if kind == "distinct" else kind
    shape = shape if shape != "aggregate" else "global"
    items, _, outputs = draw(select_items(columns, shape, inner, prefix))
    distinct = "DISTINCT " if kind == "distinct" else ""
    # the key as `k` (sometimes just `k`: an output named like a source column)
    key_item = "k" if key == "k" and draw(st.booleans()) else f"{key} AS k"
    sql = f"SELECT {distinct}{key_item}, {', '.join(items)} FROM {relation.source}{where}"
    if kind == "aggregate":
        sql += f" GROUP BY {key}"
        if draw(st.integers(0, 3)) == 0:
            sql += " HAVING count(*) > 1"
    return sql, [("k", "INTEGER"), *outputs]


@st.composite
def construct_views(draw, tables_: list[TableSpec], construct: str, portable: bool = False):
    """A view over ``tables_`` (two of them) focused on ``construct`` (one of CONSTRUCTS)."""
    if construct == "set_operations":
        return draw(set_operation_views(tables_, portable))
    if construct == "subqueries":
        return draw(subquery_views(tables_, portable))
    if construct == "windows":
        return draw(window_views(tables_, portable))
    if construct == "grouping_sets":
        return draw(grouping_set_views(tables_, portable))
    if construct == "top_k":
        return draw(top_k_views(tables_))
    if construct == "shadowed_names":
        return draw(shadowed_name_views(tables_, portable))
    if construct == "constants":
        return draw(constant_views(tables_, portable))
    if construct == "lateral":
        return draw(lateral_views(tables_, portable))
    if construct == "shared_cte":
        return draw(shared_cte_views(tables_, portable))
    if construct == "staged":
        return draw(staged_views(tables_, portable))
    t0, t1 = tables_[0], tables_[-1]
    shape = draw(st.sampled_from(OUTER_SHAPES))
    options = Options(portable=portable)
    ctes: list[str] = []

    def wrap(sql: str, columns: list, as_cte: bool) -> Relation:
        name = f"sub{len(ctes) + 1}" if not as_cte else f"cte{len(ctes) + 1}"
        if as_cte:
            ctes.append(f"{name} AS ({sql})")
            return Relation(name, name, columns)
        ctes.append("")  # keep names unique
        return Relation(f"({sql}) AS {name}", name, columns)

    def maybe_t1(relations: list[Relation]) -> list[Relation]:
        if len(tables_) > 1 and draw(st.booleans()):
            return [*relations, draw(table_relation(t1, "b1"))]
        return relations

    if construct == "mixed_aggregates":
        shape = draw(st.sampled_from(["aggregate", "global", "having"]))
        relations = maybe_t1([draw(table_relation(t0))])
        sql, _ = draw(select(relations, shape, Options(mix=True, portable=portable)))
    elif construct == "literals":
        shape = draw(st.sampled_from(["project", "distinct", "aggregate", "global"]))
        relations = [draw(table_relation(t0))]
        sql, _ = draw(select(relations, shape, Options(literals=True, portable=portable)))
    elif construct == "self_join":
        relations = [draw(table_relation(t0, "a")), draw(table_relation(t0, "b"))]
        sql, _ = draw(select(maybe_t1(relations), shape, options))
    elif construct == "identifiers":
        relations = [draw(table_relation(t0, exact=portable))]
        if len(tables_) > 1 and draw(st.booleans()):
            relations.append(draw(table_relation(t1, exact=portable)))
        sql, _ = draw(select(relations, shape, Options(bare=True, portable=portable)))
    else:
        kinds = ["project", "distinct", "aggregate"]
        if construct == "cte_chain":
            relation = draw(table_relation(t0))
            for level in range(draw(st.integers(2, 3))):
                kind = draw(st.sampled_from(kinds))
                body, columns = draw(subquery(relation, kind, options, "xyz"[level]))
                relation = wrap(body, columns, as_cte=True)
            relations = maybe_t1([relation])
        elif construct == "cte_twice":
            body, columns = draw(
                subquery(draw(table_relation(t0)), draw(st.sampled_from(kinds)), options)
            )
            cte = wrap(body, columns, as_cte=True)
            relations = [
                Relation(f"{cte.alias} AS x", "x", columns),
                Relation(f"{cte.alias} AS y", "y", columns),
            ]
        elif construct == "derived_aggregate":
            kind = draw(st.sampled_from(["distinct", "aggregate"]))
            inner = Options(
                mix=draw(st.booleans()), literals=draw(st.booleans()), portable=portable
            )
            body, columns = draw(subquery(draw(table_relation(t0)), kind, inner))
            relation = wrap(body, columns, as_cte=draw(st.booleans()))
            relations = (
                [relation, draw(table_relation(t1, "b1"))] if draw(st.booleans()) else [relation]
            )
            if len(relations) == 1:
                shape = draw(st.sampled_from(["aggregate", "global", "having"]))
        elif construct == "nested_twice":
            relation = draw(table_relation(t0))
            for level in range(2):
                kind = draw(st.sampled_from(kinds))
                body, columns = draw(subquery(relation, kind, options, "xy"[level]))
                relation = wrap(body, columns, as_cte=draw(st.booleans()))
            relations = maybe_t1([relation])
        else:
            raise ValueError(f"unknown construct {construct!r}")
        sql, _ = draw(select(relations, shape, options))
    with_ = [c for c in ctes if c]
    return (f"WITH {', '.join(with_)} " if with_ else "") + sql


# -- dbt's staged shape ------------------------------------------------------------------
@st.composite
def staged_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """dbt's mart over staging models, as the demo's ``customer_orders`` and ``order_facts``
    (their staging views inlined): "staged" relations, each a projection of one table,
    filtered or not, sometimes staged twice (a CTE over a CTE), as a CTE or a derived table;
    the first joined on its key (LEFT, inner, RIGHT or FULL) to a per-key aggregate of the
    other table's staged relation, and sometimes LEFT or inner to that staged relation
    itself; a plain, DISTINCT or grouped select over the join, filtered or not."""
    t0, t1 = tables_[0], tables_[-1]
    options = Options(portable=portable)
    ctes: list[str] = []

    def wrap(body: str, columns: list, alias: str | None = None) -> Relation:
        """``body`` as a CTE (read under ``alias``) or a derived table."""
        name = f"stg{len(ctes) + 1}"
        if draw(st.booleans()):
            ctes.append(f"{name} AS ({body})")
            if alias is None:
                return Relation(name, name, columns)
            return Relation(f"{name} AS {alias}", alias, columns)
        ctes.append("")  # keep names unique
        return Relation(f"({body}) AS {alias or name}", alias or name, columns)

    def staged(table: TableSpec, alias: str) -> Relation:
        relation = draw(table_relation(table))
        levels = draw(st.integers(1, 2))
        for level in range(levels):
            body, columns = draw(subquery(relation, "project", options, f"{alias}{level}_"))
            relation = wrap(body, columns, alias if level == levels - 1 else None)
        return relation

    first = staged(t0, "a")
    body, columns = draw(subquery(staged(t1, "s"), "aggregate", options, "n"))
    summary = wrap(body, columns, "g")
    kind = draw(st.sampled_from(["LEFT", "LEFT", "INNER", "RIGHT", "FULL"]))
    from_ = f"{first.source} {kind} JOIN {summary.source} ON g.k = a.k"
    relations = [first, summary]
    if draw(st.booleans()):
        other = staged(t1, "b")
        earlier = draw(st.sampled_from(["a", "g"]))
        from_ += f" {draw(st.sampled_from(['LEFT', 'INNER']))} JOIN {other.source}"
        from_ += f" ON b.k = {earlier}.k"
        relations.append(other)
    qualified = _qualified(relations)
    shape = draw(st.sampled_from(["project", "project", "distinct", "aggregate"]))
    items, keys, _ = draw(select_items(qualified, shape, options))
    where = f" WHERE {draw(predicate(qualified))}" if draw(st.integers(0, 3)) == 0 else ""
    distinct = "DISTINCT " if shape == "distinct" else ""
    sql = f"SELECT {distinct}{', '.join(items)} FROM {from_}{where}"
    if keys:
        sql += f" GROUP BY {', '.join(keys)}"
    with_ = [c for c in ctes if c]
    return (f"WITH {', '.join(with_)} " if with_ else "") + sql


# -- a CTE read twice --------------------------------------------------------------------
@st.composite
def shared_cte_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view reading one CTE ``c`` twice (its delta and states then computed once,
    :mod:`duckstream.tree.shared_cte`): joined with itself; in the outer query and in a
    subquery of its WHERE (a scalar aggregate over the whole CTE, as TPC-H Q15 reads its
    ``max()``, or ``IN`` / ``EXISTS``, correlated or not); or in both branches of a set
    operation, grouped or read as it is. The body is a projection, DISTINCT or aggregate over
    one table, sometimes joined to the other on their keys, sometimes over another CTE ``b``
    (read twice too, inside each read of ``c``)."""
    t0, t1 = tables_[0], tables_[-1]
    options = Options(portable=portable)
    kind = draw(st.sampled_from(["project", "distinct", "aggregate"]))
    base = draw(table_relation(t0, "a"))
    if len(tables_) > 1 and draw(st.booleans()):
        other = draw(table_relation(t1, "b"))
        from_, conditions = draw(_joined([base, other]))
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        listed = ", ".join(f"{base.alias}.{ref}" for ref, _ in base.columns)
        base = Relation(f"(SELECT {listed} FROM {from_}{where}) AS a", "a", base.columns)
    inner = ""
    if draw(st.booleans()):  # c's body reads a CTE b: b's parts made inside c's (nested)
        kind_b = draw(st.sampled_from(["project", "distinct", "aggregate"]))
        body_b, columns_b = draw(subquery(base, kind_b, options, "w"))
        inner = f"b AS ({body_b}), "
        base = Relation("b", "b", columns_b)
    body, columns = draw(subquery(base, kind, options))
    use = draw(st.sampled_from(["self_join", "subquery", "union"]))
    shape = draw(st.sampled_from(OUTER_SHAPES))
    x = Relation("c AS x", "x", columns)
    if use == "self_join":
        sql, _ = draw(select([x, Relation("c AS y", "y", columns)], shape, options))
    elif use == "subquery":
        value = draw(st.sampled_from(columns))[0]
        test = draw(
            st.sampled_from(
                [
                    f"x.{value} = (SELECT max(z.{value}) FROM c AS z)",
                    f"x.{value} >= (SELECT min(z.{value}) FROM c AS z)",
                    f"x.k IN (SELECT z.k FROM c AS z WHERE z.{value} IS NOT NULL)",
                    "x.k NOT IN (SELECT z.k + 1 FROM c AS z WHERE z.k IS NOT NULL)",
                    "EXISTS (SELECT 1 FROM c AS z WHERE z.k = x.k + 1)",
                    "NOT EXISTS (SELECT 1 FROM c AS z WHERE z.k = x.k - 1)",
                ]
            )
        )
        qualified = [(f"x.{name}", type_) for name, type_ in columns]
        items, keys, _ = draw(select_items(qualified, shape, options))
        distinct = "DISTINCT " if shape == "distinct" else ""
        sql = f"SELECT {distinct}{', '.join(items)} FROM c AS x WHERE {test}"
        if keys:
            sql += f" GROUP BY {', '.join(keys)}"
        if shape == "having":
            sql += " HAVING count(*) > 1"
    else:
        names = ", ".join(name for name, _ in columns)
        first = f" WHERE {draw(predicate(columns))}" if draw(st.booleans()) else ""
        second = f" WHERE {draw(predicate(columns))}" if draw(st.booleans()) else ""
        operation = draw(st.sampled_from(["UNION ALL", "UNION"]))
        union = f"SELECT {names} FROM c{first} {operation} SELECT {names} FROM c{second}"
        sql, _ = draw(select([Relation(f"({union}) AS u", "u", columns)], shape, options))
    return f"WITH {inner}c AS ({body}) {sql}"


# -- shadowed names ----------------------------------------------------------------------
@st.composite
def shadowed_name_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A SELECT over a derived table ``d`` whose columns ``o0``, ``o1``, ... are also the
    aliases of the SELECT's items, computed from other columns or literals (dbt's
    mrr-playbook: ``false AS is_last_month ... WHERE is_last_month``), with WHERE, GROUP BY
    and HAVING reading those names bare. Each reads ``d``'s column: an input column wins
    over a select alias in WHERE and GROUP BY (DuckDB, Spark), in HAVING inside an aggregate
    or when grouped (DuckDB; ``portable`` leaves HAVING out). ``d`` lists its columns, so
    they are known with ``schema=`` or without."""
    relation = draw(table_relation(tables_[0]))
    columns = [(f"o{i}", type_) for i, (_, type_) in enumerate(relation.columns)]
    inner = ", ".join(f"{ref} AS o{i}" for i, (ref, _) in enumerate(relation.columns))
    source = f"(SELECT {inner} FROM {relation.source}) AS d"
    where = f" WHERE {draw(predicate(columns))}" if draw(st.booleans()) else ""
    free = [name for name, _ in columns]

    def named(expr: str) -> str:
        """``expr`` aliased as a column of ``d`` while one is left (else a fresh name)."""
        if free:
            name = draw(st.sampled_from(free))
            free.remove(name)
        else:
            name = f"p{len(columns) - len(free)}_{draw(st.integers(0, 10**6))}"
        return f"{expr} AS {name}"

    def value(over: list[tuple[str, str]]) -> str:
        if draw(st.integers(0, 3)) == 0:
            return draw(literal(portable))[0]
        return draw(scalar(over))[0]

    if draw(st.booleans()):
        items = [named(value(columns)) for _ in range(draw(st.integers(1, 3)))]
        return f"SELECT {', '.join(items)} FROM {source}{where}"
    keys = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=2, unique=True))
    items = [named(value(keys)) for _ in range(draw(st.integers(1, len(keys) + 1)))]
    kinds = ["count_star", "count", "sum", "min", "max"]
    for _ in range(draw(st.integers(1, 2))):
        items.append(named(draw(typed_aggregate(columns, draw(st.sampled_from(kinds))))[0]))
    sql = f"SELECT {', '.join(items)} FROM {source}{where} GROUP BY {', '.join(k for k, _ in keys)}"
    if not portable and draw(st.booleans()):
        name = draw(st.sampled_from(columns))[0]
        key = keys[0][0]
        sql += " HAVING " + draw(
            st.sampled_from([f"count({name}) >= 1", f"min({name}) IS NOT NULL", f"{key} IS NULL"])
        )
    return sql


# -- set operations ----------------------------------------------------------------------
SET_OPERATORS = ["UNION ALL", "UNION", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]
# what a column of a set operation holds in every branch: branches agree on the kind, not
# always on the type (INTEGER with BIGINT, DECIMAL with DOUBLE), as the engine unifies them
SLOT_KINDS = ["int", "text", "num"]


@st.composite
def slot(draw, columns: list[tuple[str, str]], kind: str, grouped: bool) -> str:
    """An expression of ``kind`` over ``columns`` (the key first); ``grouped``: in a
    SELECT grouped by the key (aggregates, or the key itself)."""
    key = columns[0][0]
    text = [f"CAST({c} AS VARCHAR)" for c, _ in columns]
    numeric = [c for c, t in columns if t in NUMERIC]
    if grouped:
        options = {
            "int": [
                key,
                f"CAST({key} AS BIGINT)",
                "count(*)",
                f"count({draw(st.sampled_from(columns))[0]})",
            ],
            "text": [
                f"CAST({key} AS VARCHAR)",
                *(f"min({t})" for t in text),
                *(f"max({t})" for t in text),
            ],
            "num": [key, *(f"min({c})" for c in numeric), *(f"sum({c})" for c in numeric)],
        }[kind]
    else:
        options = {
            "int": [key, key, f"CAST({key} AS BIGINT)", f"length({draw(st.sampled_from(text))})"],
            "text": [*text, f"CASE WHEN {key} > 0 THEN 'pos' WHEN {key} < 0 THEN 'neg' END"],
            "num": [key, *numeric, f"CAST({key} AS DOUBLE) / 2"],
        }[kind]
    return draw(st.sampled_from(options))


@st.composite
def set_branch(
    draw, tables_: list[TableSpec], kinds: list[str], first: bool
) -> tuple[str, list[str]]:
    """One SELECT of a set operation: a table (or two joined on the key) projected, made
    DISTINCT or grouped by the key into ``kinds``; its SQL and output names (the first
    branch's name the set operation's columns)."""
    shape = draw(st.sampled_from(["project", "project", "distinct", "aggregate", "join"]))
    if shape == "join" and len(tables_) > 1:
        relations = [draw(table_relation(tables_[0], "a")), draw(table_relation(tables_[-1], "b"))]
    else:
        relations = [draw(table_relation(draw(st.sampled_from(tables_))))]
    columns = _qualified(relations)
    from_, conditions = draw(_joined(relations))
    if draw(st.booleans()):
        conditions.append(draw(predicate(columns)))
    grouped = shape == "aggregate"
    items, names = [], []
    for i, kind in enumerate(kinds):
        expr = draw(slot(columns, kind, grouped))
        bare = expr.split(".")[-1]
        if expr == columns[0][0] and bare not in names and draw(st.booleans()):
            items.append(expr)  # unaliased: the column names it
            names.append(bare)
        else:
            name = f"{'o' if first else 'p'}{i}"
            items.append(f"{expr} AS {name}")
            names.append(name)
    distinct = "DISTINCT " if shape == "distinct" else ""
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = f"SELECT {distinct}{', '.join(items)} FROM {from_}{where}"
    if grouped:
        sql += f" GROUP BY {columns[0][0]}"
        if draw(st.integers(0, 3)) == 0:
            sql += " HAVING count(*) > 1"
    return sql, names


@st.composite
def set_operation(draw, tables_: list[TableSpec], kinds: list[str]) -> tuple[str, list[str]]:
    """Two or three branches joined by set operators, nested either way."""
    left, names = draw(set_branch(tables_, kinds, first=True))
    right, _ = draw(set_branch(tables_, kinds, first=False))
    sql = f"{left} {draw(st.sampled_from(SET_OPERATORS))} {right}"
    if draw(st.integers(0, 2)) == 0:
        third, _ = draw(set_branch(tables_, kinds, first=False))
        op = draw(st.sampled_from(SET_OPERATORS))
        sql = draw(
            st.sampled_from(
                [
                    f"{sql} {op} {third}",
                    f"({sql}) {op} {third}",
                    f"{left} {op} ({right} {draw(st.sampled_from(SET_OPERATORS))} {third})",
                ]
            )
        )
    return sql, names


@st.composite
def set_operation_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view with set operations: at the top (maybe with ORDER BY), or in a derived table or
    CTE read by a projection, DISTINCT, GROUP BY (aggregates over a UNION ALL) or a join.
    Every expression it draws is portable (DuckDB and Spark); ``portable`` is accepted for
    the same signature as :func:`construct_views`."""
    count = draw(st.integers(1, 3))
    kinds = ["int", *(draw(st.sampled_from(SLOT_KINDS)) for _ in range(count - 1))]
    body, names = draw(set_operation(tables_, kinds))
    placement = draw(st.sampled_from(["top", "top", "derived", "cte"]))
    if placement == "top":
        return body + (" ORDER BY 1" if draw(st.integers(0, 3)) == 0 else "")
    source = "s" if placement == "cte" else f"({body}) AS s"
    s = [f"s.{n}" for n in names]
    outer = draw(st.sampled_from(["project", "distinct", "aggregate", "global", "join"]))
    if outer == "join" and len(tables_) > 1:
        t1 = draw(table_relation(tables_[-1], "b1"))
        on = f"{s[0]} = b1.{t1.columns[0][0]}"
        other = draw(st.sampled_from(t1.columns))[0]
        select = f"SELECT {', '.join(s)}, b1.{other} AS x FROM {source} JOIN {t1.source} ON {on}"
    elif outer in ("aggregate", "global"):
        aggregates = [
            "count(*) AS n",
            f"count({s[-1]}) AS c",
            f"min({s[-1]}) AS lo",
            f"max({s[0]}) AS hi",
        ]
        picked = ", ".join(
            draw(st.lists(st.sampled_from(aggregates), min_size=1, max_size=3, unique=True))
        )
        if outer == "global":
            select = f"SELECT {picked} FROM {source}"
        else:
            select = f"SELECT {s[0]}, {picked} FROM {source} GROUP BY {s[0]}"
    else:
        distinct = "DISTINCT " if outer == "distinct" else ""
        where = f" WHERE {s[0]} IS NOT NULL" if draw(st.booleans()) else ""
        select = f"SELECT {distinct}{', '.join(s)} FROM {source}{where}"
    return f"WITH s AS ({body}) {select}" if placement == "cte" else select


SUBQUERY_KINDS = ["exists", "not_exists", "in", "not_in", "scalar", "scalar_correlated"]
SUBQUERY_AGGREGATES = ["count(*)", "count({v})", "sum(i.k)", "min({v})", "max({v})", "avg(i.k)"]


@st.composite
def subquery_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view whose WHERE (or select list) holds a subquery over the last table (alias ``i``)
    read by the first (alias ``o``): ``[NOT] EXISTS`` correlated by equalities, by other
    comparisons or not, ``[NOT] IN``, ``op ANY / ALL``, a scalar aggregate (correlated or
    not, counts included), at the top of WHERE or under OR / NOT (where SQL's UNKNOWN
    differs from FALSE) or as an item; in a plain, DISTINCT, grouped or global view, at the
    top or inside a CTE.
    ``portable``: no ``IN`` as an item (Spark gives FALSE where SQL gives UNKNOWN there)."""
    t0, t1 = tables_[0], tables_[-1]
    outer = [(f"o.{c.name}", c.type) for c in t0.columns]
    inner = [(f"i.{c.name}", c.type) for c in t1.columns]
    kind = draw(st.sampled_from(SUBQUERY_KINDS + ([] if portable else ["quantified"])))
    correlations = []
    if kind in ("exists", "not_exists", "scalar_correlated") or draw(st.booleans()):
        correlations.append("i.k = o.k")
        same = [(a, b) for a, ta in inner[1:] for b, tb in outer[1:] if ta == tb]
        if same and draw(st.integers(0, 2)) == 0:
            a, b = draw(st.sampled_from(same))
            correlations.append(f"{b} = {a}")
    if kind == "scalar":
        correlations = []
    # other comparisons (EXISTS and IN only): joined to the outer columns' values
    compared = [(a, b) for a, ta in inner[1:] for b, tb in outer[1:] if ta == tb]
    by_comparison = (
        kind in ("exists", "not_exists", "in") and compared and draw(st.integers(0, 2)) == 0
    )
    if by_comparison:
        a, b = draw(st.sampled_from(compared))
        op = draw(st.sampled_from(["<>", "<", "<=", ">", ">="]))
        # either way round: the outer side first is the mirrored comparison
        correlations.append(f"{a} {op} {b}" if draw(st.booleans()) else f"{b} {op} {a}")
    conditions = list(correlations)
    if draw(st.booleans()):
        conditions.append(draw(predicate(inner)))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    source = f"{quote_ident(t1.name)} AS i"
    positive = True
    if kind in ("exists", "not_exists"):
        item = draw(st.sampled_from(["1", "i.k", "*"]))
        condition = f"EXISTS (SELECT {item} FROM {source}{where})"
        if kind == "not_exists":
            condition = f"NOT {condition}"
        positive = False
    elif kind in ("in", "not_in"):
        pairs = [(a, b) for a, ta in inner for b, tb in outer if ta == tb]
        v, x = draw(st.sampled_from(pairs))
        condition = f"{x} {'NOT ' if kind == 'not_in' else ''}IN (SELECT {v} FROM {source}{where})"
        positive = bool(by_comparison)  # else also under OR / NOT, where UNKNOWN matters
    elif kind == "quantified":  # DuckDB only: Spark SQL has no ANY / ALL over a subquery
        pairs = [(a, b) for a, ta in inner for b, tb in outer if ta == tb]
        v, x = draw(st.sampled_from(pairs))
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        quantifier = draw(st.sampled_from(["ANY", "SOME", "ALL"]))
        condition = f"{x} {op} {quantifier} (SELECT {v} FROM {source}{where})"
        positive = False
    else:
        v = draw(st.sampled_from(inner))[0]
        aggregate = draw(st.sampled_from(SUBQUERY_AGGREGATES)).format(v=v)
        if aggregate.startswith(("min", "max")):
            type_ = next(t for n, t in inner if n == v)
            x = draw(st.sampled_from([n for n, t in outer if t == type_] or ["NULL"]))
        else:
            x = "o.k"
        op = draw(st.sampled_from(["=", "<>", "<", ">=", ">"]))
        condition = f"{x} {op} (SELECT {aggregate} FROM {source}{where})"
        positive = False
    other = draw(predicate(outer)) if draw(st.booleans()) else None
    if other is not None:
        joiner = draw(st.sampled_from(["AND", "OR"])) if not positive else "AND"
        condition = f"({condition} {joiner} {other})"
    if not positive and draw(st.integers(0, 3)) == 0:
        condition = f"NOT ({condition})"
    shape = draw(st.sampled_from(["project", "distinct", "aggregate", "global", "item"]))
    c = outer[-1][0]
    as_item = not positive and not (portable and kind in ("in", "not_in"))
    if shape == "item" and as_item:  # the predicate's value in the select list
        return f"SELECT o.k, {c} AS c, {condition} AS b FROM {quote_ident(t0.name)} AS o"
    select = {
        "item": f"SELECT o.k, {c} AS c FROM {quote_ident(t0.name)} AS o",
        "project": f"SELECT o.k, {c} AS c FROM {quote_ident(t0.name)} AS o",
        "distinct": f"SELECT DISTINCT {c} AS c FROM {quote_ident(t0.name)} AS o",
        "aggregate": f"SELECT o.k, count(*) AS n, count({c}) AS m FROM {quote_ident(t0.name)} AS o",
        "global": f"SELECT count(*) AS n, count({c}) AS m FROM {quote_ident(t0.name)} AS o",
    }[shape]
    group = " GROUP BY o.k" if shape == "aggregate" else ""
    view = f"{select} WHERE {condition}{group}"
    if draw(st.booleans()):
        return view
    inside = f"SELECT o.k, {c} AS c FROM {quote_ident(t0.name)} AS o WHERE {condition}"
    return f"WITH w AS ({inside}) SELECT w.k, w.c FROM w"


# Window functions whose value depends only on the rows' values when the ORDER BY is partial
# (peers share a value), and those that need a total order (a tie could be broken either way).
PEER_WINDOWS = ["rank()", "dense_rank()", "count(*)", "count({x})", "min({x})", "max({x})"]
PEER_NUMERIC = ["sum({n})", "avg({n})"]
ROW_WINDOWS = [
    *("row_number()", "lag({x})", "lead({x}, 2)", "first_value({x})", "last_value({x})"),
    *("nth_value({x}, 2)", "ntile(2)"),
]
DISTRIBUTION_WINDOWS = ["percent_rank()", "cume_dist()"]  # by peers, need an ORDER BY
ROW_FRAMES = [
    "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
    "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING",
]


@st.composite
def _first_table_maybe_joined(
    draw, tables_: list[TableSpec], join: str = "LEFT JOIN"
) -> tuple[str, list]:
    """The first table as ``o``, in a quarter of the draws joined (``join``) to the last as
    ``i`` on ``k``: the FROM clause and its (qualified column, type) pairs."""
    t0, t1 = tables_[0], tables_[-1]
    columns = [(f"o.{quote_ident(c.name)}", c.type) for c in t0.columns]
    source = f"{quote_ident(t0.name)} AS o"
    if len(tables_) > 1 and draw(st.integers(0, 3)) == 0:
        source += f" {join} {quote_ident(t1.name)} AS i ON i.k = o.k"
        columns += [(f"i.{quote_ident(c.name)}", c.type) for c in t1.columns]
    return source, columns


@st.composite
def window_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view with one to three window functions over the first table (alias ``o``), maybe
    LEFT JOINed to the last (``i``), maybe filtered: partitioned by none, one or two
    columns; ranks and totals ordered by some columns or none; ``row_number``, ``lag`` /
    ``lead``, ``first_value`` and ``ROWS`` frames ordered by every column the view reads (so
    that no row's value depends on how a tie is broken: recomputation may break it another
    way). The first window numbers rows; the view is that SELECT, or reads it from a derived
    table or CTE filtered on the number (the top-k shape; ``QUALIFY`` on DuckDB), under
    DISTINCT, under GROUP BY, or joined on it. A quarter of them window the SELECT's own
    GROUP BY instead (:func:`_grouped_windows`). ``portable``: no ``QUALIFY`` (not in Spark
    3.5).
    """
    t1 = tables_[-1]
    source, columns = draw(_first_table_maybe_joined(tables_))
    refs = [ref for ref, _ in columns]
    numeric = [ref for ref, type_ in columns if type_ in NUMERIC]

    def order(total: bool) -> str:
        picked = draw(st.permutations(refs)) if total else draw(st.lists(st.sampled_from(refs)))
        nulls = ["", " NULLS FIRST", " NULLS LAST"]
        keys = [
            f"{ref} {draw(st.sampled_from(['ASC', 'DESC']))}{draw(st.sampled_from(nulls))}"
            for ref in dict.fromkeys(picked)
        ]
        return f" ORDER BY {', '.join(keys)}" if keys else ""

    def window(numbering: bool) -> str:
        partition = list(dict.fromkeys(draw(st.lists(st.sampled_from(refs), max_size=2))))
        over = f"PARTITION BY {', '.join(partition)}" if partition else ""
        kinds = ["peer", "row", "frame"] + (["numeric"] if numeric else [])
        kind = draw(st.sampled_from(["rank", "row"] if numbering else kinds))
        x = draw(st.sampled_from(refs))
        n = draw(st.sampled_from(numeric)) if numeric else x
        if kind == "rank":
            function = draw(st.sampled_from(["rank()", "dense_rank()"]))
            over += order(total=False) or order(total=True)  # Spark: ranks need an ORDER BY
        elif kind == "row":
            function = "row_number()" if numbering else draw(st.sampled_from(ROW_WINDOWS))
            over += order(total=True)
        elif kind == "frame":
            function = draw(st.sampled_from([*PEER_WINDOWS[2:], "first_value({x})"]))
            over += f"{order(total=True)} {draw(st.sampled_from(ROW_FRAMES))}"
        else:
            peers = PEER_WINDOWS + DISTRIBUTION_WINDOWS
            function = draw(st.sampled_from(peers if kind == "peer" else PEER_NUMERIC))
            ordered = order(total=False)
            ranking = ("rank", "dense_rank", "percent_rank", "cume_dist")
            if function.startswith(ranking) and not ordered:
                ordered = order(total=True)
            over += ordered
        return f"{function.format(x=x, n=n)} OVER ({over.strip()})"

    where = f" WHERE {draw(predicate(columns))}" if draw(st.integers(0, 3)) == 0 else ""
    if draw(st.integers(0, 3)) == 0:
        inner, names, count = draw(_grouped_windows(columns, numeric, source + where))
    else:
        count = draw(st.integers(1, 3))
        windows = [f"{window(numbering=j == 0)} AS w{j}" for j in range(count)]
        picked = draw(st.lists(st.sampled_from(refs), min_size=1, max_size=3))
        shown = list(dict.fromkeys(picked))
        items = [f"{ref} AS c{j}" for j, ref in enumerate(shown)]
        inner = f"SELECT {', '.join(items + windows)} FROM {source}{where}"
        names = [f"c{j}" for j in range(len(shown))] + [f"w{j}" for j in range(count)]
    placement = draw(st.sampled_from(["top", "filtered", "cte", "distinct", "aggregate", "joined"]))
    if placement == "top":
        return inner
    if placement == "filtered" and not portable and draw(st.booleans()):
        return f"{inner} QUALIFY w0 <= {draw(st.integers(1, 2))}"
    body = f"({inner}) AS s" if placement != "cte" else "s"
    prefix = f"WITH s AS ({inner}) " if placement == "cte" else ""
    s = [f"s.{name}" for name in names]
    if placement in ("filtered", "cte"):
        view = f"SELECT {', '.join(s)} FROM {body} WHERE s.w0 <= {draw(st.integers(1, 2))}"
    elif placement == "distinct":
        view = f"SELECT DISTINCT {', '.join(draw(st.permutations(s))[:2])} FROM {body}"
    elif placement == "aggregate":
        view = (
            f"SELECT s.c0, count(*) AS n, max(s.w0) AS hi, count(s.w1) AS m FROM {body}"
            " GROUP BY s.c0"
            if count > 1
            else f"SELECT s.c0, count(*) AS n, max(s.w0) AS hi FROM {body} GROUP BY s.c0"
        )
    else:
        view = (
            f"SELECT {', '.join(s)}, b.k AS bk FROM {body}"
            f" JOIN {quote_ident(t1.name)} AS b ON b.k = s.w0"
        )
    return prefix + view


@st.composite
def _grouped_windows(draw, columns: list[tuple[str, str]], numeric: list[str], from_where: str):
    """Windows over the SELECT's own GROUP BY: ranks of groups by an aggregate, a group's
    share of the total (``sum(count(*)) OVER ()``), a running total of an aggregate, maybe
    with HAVING. Returns the SELECT, its column names and how many windows it has."""
    refs = [ref for ref, _ in columns]
    keys = list(dict.fromkeys(draw(st.lists(st.sampled_from(refs), min_size=1, max_size=2))))
    aggregates = ["count(*)", f"max({draw(st.sampled_from(refs))})"]
    if numeric:
        aggregates.append(f"sum({draw(st.sampled_from(numeric))})")
    by = draw(st.sampled_from(aggregates))
    partition = f"PARTITION BY {keys[0]} " if len(keys) > 1 and draw(st.booleans()) else ""
    # every key and aggregate: a total order of the groups
    total = ", ".join(f"{e} {draw(st.sampled_from(['ASC', 'DESC']))}" for e in keys + aggregates)
    first = draw(
        st.sampled_from(
            [
                f"rank() OVER ({partition}ORDER BY {by} DESC)",
                f"dense_rank() OVER ({partition}ORDER BY {by})",
                f"row_number() OVER ({partition}ORDER BY {total})",
            ]
        )
    )
    summed = draw(st.sampled_from([a for a in aggregates if not a.startswith("max")]))
    others = [
        f"count(*) * 1.0 / sum(count(*)) OVER ({partition.strip()})",
        f"sum({summed}) OVER ({partition}ORDER BY {total} ROWS BETWEEN UNBOUNDED PRECEDING"
        " AND CURRENT ROW)",
        f"max({by}) OVER ({partition.strip()})",
    ]
    windows = [first, *draw(st.lists(st.sampled_from(others), max_size=2))]
    items = [f"{key} AS c{j}" for j, key in enumerate(keys)]
    items += [f"{a} AS a{j}" for j, a in enumerate(aggregates)]
    items += [f"{w} AS w{j}" for j, w in enumerate(windows)]
    having = " HAVING count(*) > 1" if draw(st.integers(0, 3)) == 0 else ""
    sql = f"SELECT {', '.join(items)} FROM {from_where} GROUP BY {', '.join(keys)}{having}"
    names = [f"c{j}" for j in range(len(keys))] + [f"a{j}" for j in range(len(aggregates))]
    return sql, names + [f"w{j}" for j in range(len(windows))], len(windows)


@st.composite
def grouping_set_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view over the first table (maybe joined to the last on ``k``) grouped by ROLLUP,
    CUBE, GROUPING SETS (with a repeat or ``()``), or a key and a ROLLUP (DuckDB has no
    ``WITH ROLLUP``),
    with aggregates (some over a grouping column), GROUPING / GROUPING_ID, maybe a window
    partitioned by the grouping level, maybe WHERE and HAVING; at the top, or in a derived
    table read by a filter or an aggregate.
    ``portable``: GROUPING_ID's arguments are the grouping columns in order (Spark's rule),
    and not after GROUPING SETS."""
    source, columns = draw(_first_table_maybe_joined(tables_, join="JOIN"))
    refs = [ref for ref, _ in columns]
    numeric = [ref for ref, type_ in columns if type_ in NUMERIC]
    keys = list(dict.fromkeys(draw(st.lists(st.sampled_from(refs), min_size=1, max_size=3))))
    listed = ", ".join(keys)
    form = draw(st.sampled_from(["rollup", "cube", "sets", "key_rollup"]))
    if form == "rollup":
        group = f"ROLLUP ({listed})"
    elif form == "cube":
        group = f"CUBE ({listed})"
    elif form == "sets":
        picked = draw(st.lists(st.lists(st.sampled_from(keys), max_size=2), min_size=1, max_size=4))
        picked.append(keys)  # every key grouped by in some set (else SQL refuses the view)
        group = (
            f"GROUPING SETS ({', '.join('(' + ', '.join(dict.fromkeys(p)) + ')' for p in picked)})"
        )
    else:
        group = f"{keys[0]}, ROLLUP ({', '.join(keys[1:] or keys)})"
    aggregates = ["count(*)", f"count({draw(st.sampled_from(refs))})"]
    aggregates += [f"{f}({draw(st.sampled_from(refs))})" for f in ("min", "max")]
    if numeric:
        aggregates.append(f"sum({draw(st.sampled_from(numeric))})")
    picked_aggregates = draw(st.lists(st.sampled_from(aggregates), min_size=1, max_size=3))
    items = [f"{key} AS c{j}" for j, key in enumerate(keys)]
    items += [f"{a} AS a{j}" for j, a in enumerate(picked_aggregates)]
    if draw(st.booleans()):
        items.append(f"grouping({draw(st.sampled_from(keys))}) AS g")
    if portable and form != "sets" and draw(st.booleans()):
        items.append(f"grouping_id({listed}) AS gid")
    elif not portable and draw(st.booleans()):
        items.append(f"grouping_id({', '.join(draw(st.permutations(keys)))}) AS gid")
    if draw(st.integers(0, 2)) == 0:
        # a window over the sets' rows (TPC-DS Q36, Q70, Q86); deterministic under ties
        level = " + ".join(f"grouping({k})" for k in draw(st.permutations(keys))[:2])
        ranked = draw(st.sampled_from(picked_aggregates))
        functions = ["rank()", "dense_rank()", "count(*)"]
        if ranked.startswith(("count", "sum")):  # a number (max(x) may be a VARCHAR)
            functions.append(f"sum({ranked})")
        function = draw(st.sampled_from(functions))
        order = f" ORDER BY {ranked} DESC" if function.endswith("rank()") else ""
        items.append(f"{function} OVER (PARTITION BY {level}{order}) AS w")
    where = f" WHERE {draw(predicate(columns))}" if draw(st.integers(0, 3)) == 0 else ""
    having = " HAVING count(*) > 1" if draw(st.integers(0, 3)) == 0 else ""
    inner = f"SELECT {', '.join(items)} FROM {source}{where} GROUP BY {group}{having}"
    placement = draw(st.sampled_from(["top", "top", "filtered", "aggregated"]))
    if placement == "top":
        return inner
    if placement == "filtered":
        return f"SELECT s.c0, s.a0 FROM ({inner}) AS s WHERE s.c0 IS NOT NULL OR s.a0 IS NULL"
    return f"SELECT s.c0, count(*) AS n, count(s.a0) AS m FROM ({inner}) AS s GROUP BY s.c0"


@st.composite
def top_k_views(draw, tables_: list[TableSpec]) -> str:
    """A view that chooses rows: ``ORDER BY ... LIMIT k [OFFSET m]`` or ``DISTINCT ON``, over
    the first table (``o``) maybe LEFT JOINed to the last (``i``), maybe filtered or grouped.
    ORDER BY keys are any columns (not a total order: ties are the point, and the harness
    recomputes with the tie-break the plan keeps), by name, position or expression, either
    direction, NULLs first or last, or none at all. The SELECT is the view, a derived table
    joined or aggregated, a UNION ALL branch, or the ranked rows of a UNION ALL. Portable:
    Spark's transpiled SQL has neither DISTINCT ON nor FETCH, and sqlglot writes both.
    """
    t1 = tables_[-1]
    source, columns = draw(_first_table_maybe_joined(tables_))
    refs = [ref for ref, _ in columns]
    where = f" WHERE {draw(predicate(columns))}" if draw(st.integers(0, 3)) == 0 else ""
    shown = list(dict.fromkeys(draw(st.lists(st.sampled_from(refs), min_size=1, max_size=3))))
    grouped = draw(st.integers(0, 3)) == 0
    if grouped:
        items = [f"{ref} AS c{j}" for j, ref in enumerate(shown)] + ["count(*) AS n"]
        tail = f" GROUP BY {', '.join(shown)}"
        candidates = [*shown, "count(*)", "n", *[str(j + 1) for j in range(len(items))]]
    else:
        items = [f"{ref} AS c{j}" for j, ref in enumerate(shown)]
        tail = ""
        candidates = [*refs, *[f"c{j}" for j in range(len(shown))], "1"]
    names = [f"c{j}" for j in range(len(shown))] + (["n"] if grouped else [])

    def direction() -> str:
        nulls = draw(st.sampled_from(["", " NULLS FIRST", " NULLS LAST"]))
        return draw(st.sampled_from(["", " DESC"])) + nulls

    keys = list(dict.fromkeys(draw(st.lists(st.sampled_from(candidates), max_size=2))))
    order = ", ".join(f"{key}{direction()}" for key in keys)
    kind = draw(st.sampled_from(["limit", "limit", "offset", "distinct_on"]))
    if kind == "distinct_on" and not grouped:
        on = list(dict.fromkeys(draw(st.lists(st.sampled_from(shown), min_size=1, max_size=2))))
        sql = f"SELECT DISTINCT ON ({', '.join(on)}) {', '.join(items)} FROM {source}{where}"
        sql += f" ORDER BY {', '.join(on)}{', ' + order if order else ''}" if order else ""
    else:
        sql = f"SELECT {', '.join(items)} FROM {source}{where}{tail}"
        sql += f" ORDER BY {order}" if order else ""
        sql += f" LIMIT {draw(st.integers(0, 4))}"
        sql += f" OFFSET {draw(st.integers(1, 2))}" if kind == "offset" else ""
    placements = ["top", "top", "aggregate", "branch", "union"]
    if dict(columns)[shown[0]] == "INTEGER":  # joined to t1's INTEGER key on c0
        placements.append("joined")
    placement = draw(st.sampled_from(placements))
    s = ", ".join(f"s.{name}" for name in names)
    if placement == "joined":
        b = quote_ident(t1.name)
        return f"SELECT {s}, b.k AS bk FROM ({sql}) AS s JOIN {b} AS b ON b.k = s.c0"
    if placement == "aggregate":
        return f"SELECT s.c0, count(*) AS m FROM ({sql}) AS s GROUP BY s.c0"
    if placement == "branch":
        # t1's INTEGER key where c0 is one too: DuckDB refuses to union an INTEGER with a DATE
        first = "b.k" if dict(columns)[shown[0]] == "INTEGER" else "NULL"
        nulls = ", ".join("NULL" for _ in names[1:])
        other = f"SELECT {first}{', ' + nulls if nulls else ''} FROM {quote_ident(t1.name)} AS b"
        return f"({sql}) UNION ALL {other}"
    if placement == "union":
        return (
            f"SELECT {s} FROM ({sql}) AS s UNION ALL SELECT {s} FROM ({sql}) AS s"
            f" ORDER BY 1 DESC LIMIT {draw(st.integers(1, 5))}"
        )
    return sql


@st.composite
def spine(draw, alias: str, portable: bool = False) -> str:
    """A constant relation of integers (column ``n``) around the generated keys (-3..3):
    a series, a VALUES list, FROM-less SELECTs (as ``dbt_utils.generate_series`` writes
    them: powers of two cross-joined), in FROM or as a derived table."""
    kind = draw(st.sampled_from(["range", "generate_series", "values", "unions", "powers"]))
    low, high = draw(st.integers(-3, 1)), draw(st.integers(-1, 3))
    if kind == "range":
        return f"range({low}, {high}) AS {alias}(n)"
    if kind == "generate_series":
        step = draw(st.sampled_from([1, 1, 2, -1]))
        start, end = (high, low) if step < 0 else (low, high)
        return f"generate_series({start}, {end}, {step}) AS {alias}(n)"
    if kind == "values":
        picked = draw(st.lists(st.sampled_from(["-1", "0", "1", "2", "NULL"]), min_size=1))
        if all(p == "NULL" for p in picked):
            picked.append("0")
        rows = ", ".join(f"({p})" for p in picked)
        return f"(VALUES {rows}) AS {alias}(n)"
    if kind == "unions":
        picked = draw(st.lists(st.integers(-2, 2), min_size=1, max_size=4))
        body = " UNION ALL ".join(f"SELECT {n} AS n" for n in picked)
        return f"({body}) AS {alias}"
    # dbt_utils.generate_series: numbers 1..4 from two bits, then a window numbering them
    bits = "SELECT 0 AS generated_number UNION ALL SELECT 1"
    numbers = (
        "SELECT p0.generated_number * 1 + p1.generated_number * 2 + 1 AS generated_number"
        f" FROM ({bits}) AS p0 CROSS JOIN ({bits}) AS p1"
    )
    if draw(st.booleans()):
        numbered = f"SELECT generated_number - 3 AS n FROM ({numbers}) AS u"
    else:
        numbered = f"SELECT row_number() OVER (ORDER BY 1) - 3 AS n FROM ({numbers}) AS u"
    return f"({numbered}) AS {alias}"


@st.composite
def constant_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view that reads a constant relation (:func:`spine`) beside the tables: a table's
    keys UNION ALL / UNION / EXCEPT constants, a table joined (inner, LEFT either way, FULL,
    CROSS) with a spine, an aggregate over a spine joined to a table, a VALUES CTE joined.
    Every form is portable (both engines)."""
    t0 = draw(table_relation(tables_[0], "a"))
    key = f"a.{t0.columns[0][0]}"
    other, _ = draw(st.sampled_from(t0.columns))
    shape = draw(st.sampled_from(["union", "join", "aggregate", "values_cte"]))
    if shape == "union":
        constants = draw(st.lists(st.integers(-2, 2), min_size=1, max_size=3))
        branches = " UNION ALL ".join(f"SELECT {n} AS k" for n in constants)
        op = draw(st.sampled_from(["UNION ALL", "UNION ALL", "UNION", "EXCEPT", "INTERSECT"]))
        table = f"SELECT {key} AS k FROM {t0.source}"
        if draw(st.booleans()):
            table += f" WHERE {draw(predicate([(f'a.{c}', t) for c, t in t0.columns]))}"
        body = f"{table} {op} {branches}" if draw(st.booleans()) else f"{branches} {op} {table}"
        if draw(st.booleans()):
            return body
        return f"SELECT u.k, count(*) AS c FROM ({body}) AS u GROUP BY u.k"
    s = draw(spine("s", portable))
    if shape == "values_cte":
        labels = ", ".join(f"({n}, 'v{n}')" for n in draw(st.lists(st.integers(-2, 2), min_size=1)))
        s = "v"
        join = draw(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
        first, second = (f"{t0.source}", "v") if draw(st.booleans()) else ("v", f"{t0.source}")
        return (
            f"WITH v(n, label) AS (VALUES {labels}) SELECT v.n, v.label, {key} AS k,"
            f" a.{other} AS x FROM {first} {join} {second} ON {key} = v.n"
        )
    join = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]))
    first, second = (s, t0.source) if draw(st.booleans()) else (t0.source, s)
    on = "" if join == "CROSS JOIN" else f" ON {key} = s.n"
    from_ = f"{first} {join} {second}{on}"
    if shape == "join":
        if len(tables_) > 1 and draw(st.booleans()):  # the spine between two tables
            t1 = draw(table_relation(tables_[-1], "b"))
            then = draw(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
            from_ += f" {then} {t1.source} ON b.{t1.columns[0][0]} = s.n"
            return f"SELECT s.n, {key} AS k, b.{t1.columns[-1][0]} AS y FROM {from_}"
        return f"SELECT s.n, {key} AS k, a.{other} AS x FROM {from_}"
    aggregates = ["count(*) AS c", f"count({key}) AS ck", f"min(a.{other}) AS lo"]
    picked = ", ".join(draw(st.lists(st.sampled_from(aggregates), min_size=1, unique=True)))
    return f"SELECT s.n, {picked} FROM {from_} GROUP BY s.n"


LIST_ELEMENTS = ["{k}", "{k}", "{k} * 2", "1", "NULL", "-{k}"]


@st.composite
def row_list(draw, key: str) -> str:
    """A list built from a row's integer key ``key``: duplicate and NULL elements, and
    (through a CASE) empty and NULL lists for some rows."""
    elements = draw(st.lists(st.sampled_from(LIST_ELEMENTS), min_size=1, max_size=4))
    listed = "[" + ", ".join(e.format(k=key) for e in elements) + "]"
    if draw(st.booleans()):
        return listed
    return f"CASE WHEN {key} > 0 THEN {listed} WHEN {key} = 0 THEN CAST([] AS INTEGER[]) END"


@st.composite
def lateral_views(draw, tables_: list[TableSpec], portable: bool = False) -> str:
    """A view with a table function over a row's columns or a LATERAL subquery: ``unnest``
    of a list built from the row (:func:`row_list`), ``range`` / ``generate_series`` between
    bounds from the row (NULL, reversed or empty for some rows), comma / CROSS JOIN LATERAL /
    LEFT JOIN LATERAL ... ON TRUE, projected, grouped by the element or by the row, filtered,
    joined to the second table after; or a LATERAL subquery over the second table correlated
    by an equality or an inequality, aggregating or (not ``portable``: Spark 3.5 cannot
    correlate one) choosing rows with ORDER BY ... LIMIT."""
    t0 = draw(table_relation(tables_[0], "a"))
    key = f"a.{t0.columns[0][0]}"
    other, _ = draw(st.sampled_from(t0.columns))
    kind = draw(st.sampled_from(["unnest", "unnest", "series", "subquery"]))
    if kind == "subquery" and len(tables_) > 1:
        t1 = draw(table_relation(tables_[-1], "b"))
        inner = f"b.{t1.columns[0][0]}"
        value, _ = draw(st.sampled_from(t1.columns))
        correlation = draw(st.sampled_from([f"{inner} = {key}", f"{inner} > {key}"]))
        body = draw(
            st.sampled_from(
                [
                    f"SELECT {inner} AS y, b.{value} AS z FROM {t1.source} WHERE {correlation}",
                    f"SELECT count(*) AS y, max({inner}) AS z FROM {t1.source} WHERE {correlation}",
                    *(
                        []
                        if portable
                        else [
                            f"SELECT {inner} AS y, b.{value} AS z FROM {t1.source} WHERE"
                            f" {correlation} ORDER BY b.{value} DESC LIMIT"
                            f" {draw(st.integers(1, 2))}"
                        ]
                    ),
                ]
            )
        )
        join = draw(st.sampled_from([", LATERAL", "CROSS JOIN LATERAL", "LEFT JOIN LATERAL"]))
        on = " ON TRUE" if join.startswith("LEFT") else ""
        from_ = f"{t0.source} {join} ({body}) AS l{on}"
        if draw(st.booleans()):
            return f"SELECT {key} AS k, a.{other} AS x, l.y, l.z FROM {from_}"
        return f"SELECT l.y, count(*) AS n, count({key}) AS ck FROM {from_} GROUP BY l.y"
    if kind == "series":
        low = draw(st.sampled_from([key, "0", f"{key} - 1"]))
        high = draw(st.sampled_from([f"{key} + 2", "2", key]))
        step = draw(st.sampled_from([1, 1, 2, -1]))
        if step < 0:
            low, high = high, low
        function = draw(st.sampled_from(["range", "generate_series"]))
        call = f"{function}({low}, {high}, {step}) AS u(x)"
    else:
        call = f"unnest({draw(row_list(key))}) AS u(x)"
    join = draw(st.sampled_from([",", "CROSS JOIN LATERAL", "LEFT JOIN LATERAL"]))
    then = draw(st.sampled_from(["JOIN", "LEFT JOIN"])) if len(tables_) > 1 else None
    if join == "," and then == "LEFT JOIN":
        join = "CROSS JOIN LATERAL"  # a comma before an outer join is refused (validate)
    on = " ON TRUE" if join.startswith("LEFT") else ""
    from_ = f"{t0.source}{'' if join == ',' else ' '}{join} {call}{on}"
    if then is not None and draw(st.booleans()):
        t1 = draw(table_relation(tables_[-1], "b"))
        from_ += f" {then} {t1.source} ON b.{t1.columns[0][0]} = u.x"
        other = f"b.{t1.columns[-1][0]}"
    else:
        other = f"a.{other}"
    where = " WHERE u.x IS NULL OR u.x <> 1" if draw(st.booleans()) else ""
    shape = draw(st.sampled_from(["project", "by_element", "by_row"]))
    if shape == "project":
        return f"SELECT {key} AS k, u.x, {other} AS y FROM {from_}{where}"
    if shape == "by_element":
        return f"SELECT u.x, count(*) AS n, count({other}) AS c FROM {from_}{where} GROUP BY u.x"
    return f"SELECT {key} AS k, count(u.x) AS n, sum(u.x) AS s FROM {from_}{where} GROUP BY {key}"
