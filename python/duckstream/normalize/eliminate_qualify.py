"""Move ``QUALIFY`` into a wrapping query: ``SELECT <items> FROM ... QUALIFY <condition>``
becomes ``SELECT <names of the items> FROM (SELECT <items>, <what the condition reads> FROM
...) AS _qualified WHERE <condition over those>``, its names resolved as in ``QUALIFY``.

In ``QUALIFY`` (DuckDB 1.5.5, checked by hand) a bare name is an input column if there is one,
else a select-list alias, as in the select list: ``SELECT id, -id AS k FROM t QUALIFY
row_number() OVER (PARTITION BY k ORDER BY id) = 1`` partitions by the column ``k`` of ``t``,
and ``QUALIFY rn = 1`` reads a column ``rn`` of the input over a window aliased ``rn``. So the
parts of the condition are moved into the inner select list after its items, where every
alias is visible as in QUALIFY, under fresh names: each window function (``_w0``, ...) and
each aggregate or column read outside them (``_q0``, ...); :func:`.qualify_view` resolves
their names there, as the engine would, and the outer WHERE reads them by their fresh names.
(sqlglot's ``eliminate_qualify``, used before, replaced each alias in a window by its
expression, partitioning by ``-id``.)

A bare name outside windows that is an alias of the select list is read as the inner query's
output (the alias) unless it is known to be an input column: a column of the table by
``schema=``, of a derived table by its select list, or read as a column elsewhere in the
SELECT (``t.rn``, or bare where no alias of it is visible). Without ``schema=`` it is taken
as the alias when the alias names a window function (``row_number() OVER (...) AS rn ...
QUALIFY rn = 1``: the idiom), and otherwise resolved by :func:`.qualify_view`, which refuses
what only the table's columns could tell.

QUALIFY filters before DISTINCT, ORDER BY and LIMIT: those move to the wrapping query (an
ORDER BY or DISTINCT ON key that is not an output name is computed in the inner query).

>>> from sqlglot import parse_one
>>> view = parse_one(
...     "SELECT id, -id AS k FROM t QUALIFY row_number() OVER (PARTITION BY k ORDER BY id) = 1")
>>> print(eliminate_qualify(view).sql())  # doctest: +NORMALIZE_WHITESPACE
SELECT id, k FROM (SELECT id, -id AS k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY id) AS _w0
FROM t) AS _qualified WHERE _w0 = 1
>>> view = parse_one(
...     "SELECT DISTINCT id, row_number() OVER (ORDER BY ts) AS rn FROM t QUALIFY rn <= v")
>>> print(eliminate_qualify(view).sql())  # doctest: +NORMALIZE_WHITESPACE
SELECT DISTINCT id, rn FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY ts) AS rn, v AS _q0
FROM t) AS _qualified WHERE rn <= _q0
>>> print(eliminate_qualify(view, columns={"t": {"id": "INT", "ts": "INT", "rn": "INT",
...     "v": "INT"}}).sql())  # doctest: +NORMALIZE_WHITESPACE
SELECT DISTINCT id, rn FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY ts) AS rn, t.rn AS _q0,
v AS _q1 FROM t) AS _qualified WHERE _q0 <= _q1
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp
from sqlglot.helper import find_new_name
from sqlglot.schema import MappingSchema

from duckstream.expressions import rewrite_innermost_first

WRAPPED = "_qualified"
FROM_QUALIFY = "from_qualify"  # meta of an inner item moved out of QUALIFY (qualify_view)


def eliminate_qualify(
    expression: exp.Expr, columns: dict | None = None, dialect: str | None = None
) -> exp.Expr:
    """``columns``: the sources' columns (sqlglot's schema mapping), when known."""
    expression = expression.copy()
    schema = MappingSchema(columns, dialect=dialect) if columns is not None else None
    selects = [s for s in expression.find_all(exp.Select) if s.args.get("qualify")]
    return rewrite_innermost_first(expression, selects, lambda s: _wrap(s, schema))


def _wrap(select: exp.Select, schema: MappingSchema | None) -> exp.Select:
    inner = select.copy()
    condition = inner.args["qualify"].pop().this
    distinct, order = inner.args.get("distinct"), inner.args.get("order")
    limit, offset = inner.args.get("limit"), inner.args.get("offset")
    for key in ("distinct", "order", "limit", "offset"):
        inner.set(key, None)
    taken = {i.name.lower() for i in select.find_all(exp.Identifier)}

    def fresh(prefix: str) -> str:
        """``prefix`` (a derived table's alias) or ``prefix0``, ``prefix1``, ... unused."""
        name = find_new_name(taken, prefix) if prefix == WRAPPED else prefix + "0"
        n = 0
        while name in taken:
            n += 1
            name = f"{prefix}{n}"
        taken.add(name)
        return name

    # unnamed items are named as qualify_view would (sqlglot's qualify_outputs)
    for i, item in enumerate(inner.expressions):
        if not isinstance(item, exp.Alias | exp.Column | exp.Star):
            name = item.output_name or find_new_name(taken, f"_col_{i}")
            taken.add(name.lower())
            item.replace(exp.alias_(item.copy(), name))
    items = list(inner.expressions)
    aliases = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    outputs = {i.alias_or_name.lower() for i in items}
    starred = any(_is_star(i) for i in items)
    added: list[str] = []

    def add(node: exp.Expr, prefix: str, moved: bool = True) -> exp.Column:
        name = fresh(prefix)
        item = exp.alias_(node, name)
        if moved:
            item.meta[FROM_QUALIFY] = True
        inner.select(item, copy=False)
        added.append(name)
        return exp.column(name)

    windows: dict[str, exp.Column] = {}
    for leaf in list(_leaves(condition)):
        if isinstance(leaf, exp.Window):
            key = leaf.sql()
            if key not in windows:
                windows[key] = add(leaf.copy(), "_w")
            replacement = windows[key].copy()
        elif isinstance(leaf, exp.Column) and not leaf.table and leaf.name.lower() in aliases:
            # an alias of the select list, unless the input has the column (which wins);
            # where only the table's columns could tell, the alias if it names a window
            name = leaf.name.lower()
            column = _input_column(select, name, schema)
            if column is False or (column is None and aliases[name].find(exp.Window)):
                replacement = exp.column(leaf.this.copy())  # the inner query's output
            elif isinstance(column, exp.Column):
                column.set("this", leaf.this.copy())
                replacement = add(column, "_q")
            else:
                replacement = add(leaf.copy(), "_q")  # qualify_view tells or refuses
        else:
            replacement = add(leaf.copy(), "_q")
        if leaf is condition:
            condition = replacement
        else:
            leaf.replace(replacement)

    def outer_key(key: exp.Expr) -> exp.Expr:
        """An ORDER BY / DISTINCT ON key over the inner query's outputs."""
        if isinstance(key, exp.Literal) or (
            isinstance(key, exp.Column) and not key.table and key.name.lower() in outputs
        ):
            return key.copy()
        return add(key.copy(), "_o", moved=False)

    if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
        on = distinct.args["on"]
        keys = on.expressions if isinstance(on, exp.Tuple) else [on]
        distinct.set("on", exp.Tuple(expressions=[outer_key(k) for k in keys]))
    if order is not None:
        for ordered in order.expressions:
            ordered.set("this", outer_key(ordered.this))

    if starred:
        star = exp.Star(except_=[exp.column(n) for n in added]) if added else exp.Star()
        outer = exp.select(star)
    else:
        outer = exp.select(*(exp.column(_name(i).copy()) for i in items))
    outer = outer.from_(inner.subquery(fresh(WRAPPED), copy=False), copy=False)
    outer = outer.where(condition, copy=False)
    for key, value in (("distinct", distinct), ("order", order), ("limit", limit)):
        outer.set(key, value)
    outer.set("offset", offset)
    return outer


def _is_star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Star) or (
        isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
    )


def _name(item: exp.Expr) -> exp.Identifier:
    name = item.args.get("alias") if isinstance(item, exp.Alias) else item.this
    if isinstance(name, exp.TableAlias):
        name = name.this
    assert isinstance(name, exp.Identifier), item.sql()
    return name


def _leaves(node: exp.Expr) -> Iterator[exp.Expr]:
    """What the condition reads that the inner query must compute: its window functions,
    and its aggregates, columns and subqueries outside them."""
    subquery = isinstance(node, exp.In) and node.args.get("query") is not None
    leaf = exp.Window | exp.AggFunc | exp.Column | exp.Subquery | exp.Exists | exp.Query
    if subquery or isinstance(node, leaf):
        yield node
    else:
        for child in list(node.iter_expressions()):
            yield from _leaves(child)


def _input_column(
    select: exp.Select, name: str, schema: MappingSchema | None
) -> exp.Column | bool | None:
    """Whether ``select``'s input has a column ``name``: False if not, None when unknown;
    if it has, the column qualified by its source where that is known, else True."""
    from_ = select.args.get("from_")
    sources = [from_.this] if from_ else []
    sources += [join.this for join in select.args.get("joins") or []]
    own = [c for c in select.find_all(exp.Column) if c.find_ancestor(exp.Select) is select]
    for column in own:
        if column.table and column.name.lower() == name:
            return column.copy()  # read qualified: the view would not run without it
    found: bool | None = False
    for source in sources:
        names = _columns(source, schema)
        if names is None:
            found = None
        elif name in names:
            return exp.column(name, table=source.alias_or_name) if source.alias_or_name else True
    first = next(
        i
        for i, item in enumerate(select.expressions)
        if isinstance(item, exp.Alias) and item.alias.lower() == name
    )
    before = [*select.expressions[:first], *(select.args.get("joins") or [])]
    for column in own:
        if not column.table and column.name.lower() == name and _within(column, before):
            # read where no alias of it is visible
            if len(sources) == 1 and sources[0].alias_or_name:
                return exp.column(name, table=sources[0].alias_or_name)
            return True
    return found


def _within(node: exp.Expr, ancestors: list[exp.Expr]) -> bool:
    parent: exp.Expr | None = node
    while parent is not None:
        if any(parent is a for a in ancestors):
            return True
        parent = parent.parent
    return False


def _columns(source: exp.Expr, schema: MappingSchema | None) -> set[str] | None:
    """The lower-cased column names of a FROM item, None where unknown."""
    if isinstance(source, exp.Subquery):
        query = source.this
        while isinstance(query, exp.SetOperation | exp.Subquery):
            query = query.this
        if not isinstance(query, exp.Select) or any(_is_star(i) for i in query.expressions):
            return None
        return {i.alias_or_name.lower() for i in query.expressions}
    if isinstance(source, exp.Table) and schema is not None:
        for table in (source, _lower(source)):
            if schema.find(table, raise_on_missing=False) is not None:
                return {c.lower() for c in schema.column_names(table)}
    return None


def _lower(table: exp.Table) -> exp.Table:
    lowered = table.copy()
    for identifier in lowered.find_all(exp.Identifier):
        identifier.set("this", identifier.name.lower())
    return lowered
