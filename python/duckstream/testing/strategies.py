"""Hypothesis strategies: schemas, rows with duplicates and NULLs, views from the supported
grammar, and change cycles (several batches per window, empty windows, rows inserted and
deleted in one window, several tables changing together).

Values come from small domains so that duplicates, group collisions, join partners and
predicate flips are common; shrinking then ends at a few rows and a short view.
"""

from __future__ import annotations

import datetime
import decimal

from hypothesis import strategies as st

from duckstream.testing.differential import Column, Delete, Insert, TableSpec, Update, sql_literal

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
    choice = draw(st.integers(0, 4))
    if choice == 0 or type_ in ("DATE", "BOOLEAN"):
        return name, type_
    if type_ in NUMERIC:
        if choice == 1:
            return f"{name} * 2 + 1", type_
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
    SHAPES) and ``kind`` (one of AGGREGATES) focus it on one construct; ``outer`` lets the
    joins be outer ones."""
    columns = _columns(tables_, qualified=len(tables_) > 1)
    if shape is None:
        shape = "aggregate" if kind else draw(st.sampled_from(SHAPES))
    from_, conditions = _from_clause(draw, tables_, outer)
    if draw(st.booleans()):
        conditions.append(draw(predicate(columns)))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
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


# -- changes -----------------------------------------------------------------------------
@st.composite
def change(draw, table: TableSpec):
    kind = draw(st.sampled_from(["insert", "insert", "delete", "update"]))
    if kind == "insert":
        return Insert(table.name, tuple(draw(rows(table.columns, min_size=1, max_size=4))))
    columns = [(c.name, c.type) for c in table.columns]
    # Mostly hit rows by the small-domain key, so deletes and updates touch the view often.
    where = draw(
        st.one_of(
            st.builds(lambda v: f"k = {v}", st.integers(-3, 3)),
            st.builds(lambda v: f"k >= {v}", st.integers(-3, 3)),
            st.just("k IS NULL"),
            predicate(columns),
        )
    )
    if kind == "delete":
        return Delete(table.name, where)
    column = draw(st.sampled_from(table.columns))
    value = draw(values(column.type))
    return Update(table.name, f"{column.name} = {sql_literal(value)}", where)


@st.composite
def cycles(draw, tables_: list[TableSpec], max_cycles: int = 4) -> list:
    """Change windows: each a list of committed batches touching one or several tables."""
    result = []
    for _ in range(draw(st.integers(1, max_cycles))):
        batches = []
        for _ in range(draw(st.integers(0, 3))):
            touched = draw(st.lists(st.sampled_from(tables_), min_size=1, max_size=len(tables_)))
            batches.append(
                [draw(change(t)) for t in touched for _ in range(draw(st.integers(1, 2)))]
            )
        result.append(batches)
    return result
