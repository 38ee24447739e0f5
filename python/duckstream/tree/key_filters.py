"""Key filters: what restricts a term's reads of the sources to the rows its changes can
touch (semi-joins ``x IN (SELECT ... FROM changes)``, :class:`KeyRange` bounds on Spark), where
they may go and how they pass into derived tables (:func:`push_key_filter`).

:class:`~duckstream.tree.base.Term` places them (``key_filters``, ``carried_filters``,
``range_filters``); this module holds the rules of where a filter is sound and the settings
of one compilation (semi-joins or not, filters into the sources' states or not).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sqlglot import exp

# Whether restrictions to keys are spelled as uncorrelated semi-joins (:func:`restrict_to`
# in ``tree.aggregate``) and key filters pushed into derived tables (:func:`push_key_filter`).
# DuckDB 1.5.5 wants both: it decorrelates a NULL-safe EXISTS by grouping its whole input
# first. Set by the compiler from the engine (``Engine.key_semijoins``) for one compilation;
# on Spark the plans stay as they were, measured there. On by default (doctests, tools).
_KEY_SEMIJOINS: ContextVar[bool] = ContextVar("key_semijoins", default=True)


@contextmanager
def _setting(variable: ContextVar[bool], value: bool) -> Generator[None]:
    """``variable`` set to ``value`` while the block runs."""
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


def key_semijoins(enabled: bool) -> AbstractContextManager[None]:
    """Spell key restrictions as semi-joins (or not) while the block runs."""
    return _setting(_KEY_SEMIJOINS, enabled)


def uses_key_semijoins() -> bool:
    return _KEY_SEMIJOINS.get()


# Whether key filters also go into the sources' states (:func:`push_key_filter`): off while
# a window operator builds its terms (see :func:`states_unfiltered`).
_FILTER_STATES: ContextVar[bool] = ContextVar("filter_states", default=True)


def states_unfiltered() -> AbstractContextManager[None]:
    """Leave the sources' states without key filters while the block runs. A window
    operator's terms (top-k views recompute their whole input) planned 2.5x slower with them
    on DuckDB 1.5.5 (TPC-H Q18 with LIMIT, SF 0.1 append, CPU time)."""
    return _setting(_FILTER_STATES, False)


def is_state(relation: exp.Expr | None) -> bool | None:
    """Whether the derived table ``relation`` is a source's state (``True``) or another
    derived table (``False``); ``None`` when it is no derived table."""
    if isinstance(relation, exp.Subquery) and isinstance(relation.this, exp.Select):
        return source_state(relation.this)
    return None


def only_column(
    column: str, query: exp.Query | KeyRange
) -> Callable[[str], exp.Query | KeyRange | None]:
    """Keys for ``column`` alone: ``query`` (a copy) for it, none for the others."""
    if isinstance(query, KeyRange):
        return lambda name: query if name == column else None
    return lambda name: query.copy() if name == column else None


@dataclass(frozen=True)
class KeyRange:
    """The least and the greatest value a column of a leaf's changes takes, as run-time
    constants of one refresh, for filters on the columns the changed rows join by equality
    (:meth:`Term.range_filters`). ``bounds(table, column)``: the two bounds for a filter on
    ``column`` of the source ``table``'s state, or ``None`` where the engine has none for it
    (it knows whether the two columns compare as the equality compares them: their types).
    A NULL bound stands for none (the change's range unknown at run time, or no change)."""

    bounds: Callable[[exp.Table, str], tuple[exp.Expr, exp.Expr] | None]

    def on(self, column: exp.Column, relation: exp.Expr | None) -> exp.Expr | None:
        """``column BETWEEN COALESCE(low, column) AND COALESCE(high, column)`` for a column
        of ``relation``, a source's state (``None`` for any other relation: nothing says
        how its columns compare). The ``COALESCE`` makes a NULL bound no bound; an engine
        folds it away with a known one, leaving a literal range its scan can use.

        >>> from sqlglot import parse_one
        >>> state = parse_one("SELECT * FROM (SELECT * FROM c.s.t) AS t").args["from_"].this
        >>> key = KeyRange(lambda table, name: (exp.Literal.number(1), exp.null()))
        >>> key.on(parse_one("t.y"), state).sql()
        't.y BETWEEN COALESCE(1, t.y) AND COALESCE(NULL, t.y)'
        >>> key.on(parse_one("u.y"), parse_one("SELECT * FROM (SELECT 1 AS y) AS u")
        ...     .args["from_"].this) is None
        True
        """
        if not is_state(relation):
            return None
        assert isinstance(relation, exp.Subquery)
        alias = relation.args.get("alias")
        if alias is not None and alias.columns:  # renamed: the source's column is another
            return None
        table = relation.this.args["from_"].this
        found = self.bounds(table, column.name)
        if found is None:
            return None
        low, high = (exp.Coalesce(this=b, expressions=[column.copy()]) for b in found)
        return exp.Between(this=column.copy(), low=low, high=high)


def push_key_filter(relation: exp.Expr, condition: exp.Expr) -> bool:
    """Add ``condition``, a key filter ``t.y IN (<query>)`` on the derived table ``t``
    (``relation``), to that derived table's own WHERE, spelled with the expression ``t``
    selects as ``y``; True when it did. The filter in the term stays: the pushed copy only
    lets the engine group the rows of the keys wanted instead of the whole table, which it
    does not do by itself through a GROUP BY (TPC-H Q4's EXISTS, decorrelated into a
    DISTINCT of lineitem's order keys, refreshes 3.5x faster on an SF 1 append).

    An outer join's marker over such a derived table is seen through
    (:func:`_marked_relation`). A source's state (``SELECT * FROM t AT ...``) gets the filter
    too, on the column itself: DuckDB 1.5.5 otherwise joins the big states first and applies
    the key filter last when the changed relation is a subquery's delta (TPC-H Q21 at SF 1 on
    an append: its delta 1,524 -> 789 ms CPU; the other TPC-H joins within +-4%, Q7 +13%).
    Not in a window operator's terms (:func:`states_unfiltered`).

    Only where the groups kept are whole and no others: ``y`` is one of the keys ``t`` is
    grouped by (DISTINCT or GROUP BY), so the rows of one group share ``y``; nothing under
    windows, LIMIT, grouping sets or DISTINCT ON. Over several keys too: TPC-H Q20's DISTINCT
    of suppliers re-grouped for the changed suppliers otherwise computed its subquery (grouped
    by part and supplier) over all of lineitem, at both snapshots (SF 1 append: 1,294 -> 983
    ms CPU, Q21 unchanged; measured with the demand-narrowed deltas of ``tree.demand``).

    >>> from sqlglot import parse_one
    >>> def derived(sql):
    ...     return parse_one(f"SELECT * FROM ({sql}) AS t").args["from_"].this
    >>> t = derived("SELECT DISTINCT l.k AS y, TRUE AS m FROM l")
    >>> push_key_filter(t, parse_one("t.y IN (SELECT x FROM d)")), t.sql()
    (True, '(SELECT DISTINCT l.k AS y, TRUE AS m FROM l WHERE l.k IN (SELECT x FROM d)) AS t')
    >>> t = derived("SELECT *, TRUE AS m FROM (SELECT DISTINCT l.k AS y FROM l) AS t")
    >>> push_key_filter(t, parse_one("t.y IN (SELECT x FROM d)")), t.this.find(exp.Where).sql()
    (True, 'WHERE l.k IN (SELECT x FROM d)')
    >>> t = derived("SELECT * FROM l AT (VERSION => 3)")
    >>> push_key_filter(t, parse_one("t.y IN (SELECT x FROM d)")), t.sql()
    (True, '(SELECT * FROM l AT (VERSION => 3) WHERE y IN (SELECT x FROM d)) AS t')
    >>> t = derived("SELECT l.k AS y, sum(v) AS s FROM l GROUP BY l.k")
    >>> push_key_filter(t, parse_one("t.s IN (SELECT x FROM d)"))  # not a key: the sums change
    False
    >>> t = derived("SELECT l.k AS y, l.j AS z, sum(v) AS s FROM l GROUP BY l.k, l.j")
    >>> push_key_filter(t, parse_one("t.z IN (SELECT x FROM d)")), t.this.find(exp.Where).sql()
    (True, 'WHERE l.j IN (SELECT x FROM d)')
    """
    if not (
        isinstance(condition, exp.In)
        and isinstance(condition.this, exp.Column)
        and condition.args.get("query") is not None
        and isinstance(relation, exp.Subquery)
        and relation.alias_or_name == condition.this.table
    ):
        return False
    inner = relation.this
    if not isinstance(inner, exp.Select) or any(
        inner.args.get(k) for k in ("limit", "offset", "qualify")
    ):
        return False
    if _FILTER_STATES.get() and source_state(inner):
        # a source's state, ``SELECT * FROM t AT (...)``: every row keeps its columns
        column = exp.Column(this=condition.this.this.copy())
        inner.where(exp.In(this=column, query=condition.args["query"].copy()), copy=False)
        return True
    under = _marked_relation(inner)
    if under is not None:  # an outer join's marker (``SELECT *, TRUE AS m FROM (...) AS t``)
        column = condition.this.copy()
        column.set("table", exp.to_identifier(under.alias_or_name))
        return push_key_filter(under, exp.In(this=column, query=condition.args["query"]))
    distinct = inner.args.get("distinct")
    if any(inner.find_all(exp.Window)) or (distinct is not None and distinct.args.get("on")):
        return False
    found = [e for e in inner.expressions if e.alias_or_name == condition.this.name]
    if len(found) != 1:
        return False
    key = found[0].unalias()
    group = inner.args.get("group")
    if group is not None:
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "all")):
            return False
        keys = list(group.expressions)
    elif distinct is not None:
        keys = [e.unalias() for e in inner.expressions]
    else:
        return False  # not grouped: the engine pushes a filter through a projection itself
    varying = [k for k in keys if k.find(exp.Column) is not None]
    if key not in varying or key.find(exp.AggFunc) is not None:
        return False
    pushed = exp.In(this=key.copy(), query=condition.args["query"].copy())
    inner.where(pushed, copy=False)
    if isinstance(key, exp.Column) and key.table:
        # on to the derived table ``key`` is a column of, if it is grouped in turn by it
        # (TPC-H Q18's DISTINCT of an aggregate); a source's state under ``inner`` has the
        # filter right above it, which the engine pushes into the scan itself
        source = inner.args.get("from_")
        relations = [source.this] if source is not None else []
        relations += [j.this for j in inner.args.get("joins") or []]
        for relation in relations:
            if relation.alias_or_name == key.table and not is_state(relation):
                push_key_filter(relation, pushed)
    return True


def source_state(select: exp.Select) -> bool:
    """Whether ``select`` is ``SELECT * FROM <table>`` (a source's state), nothing else."""
    source = select.args.get("from_")
    return (
        source is not None
        and isinstance(source.this, exp.Table)
        and len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and not any(select.args.get(k) for k in ("where", "joins", "group", "having", "distinct"))
    )


def _marked_relation(select: exp.Select) -> exp.Subquery | None:
    """The derived table under ``SELECT *, <constants> FROM (...) AS t`` (no WHERE, joins or
    grouping): its rows are the derived table's, each with the same constants added."""
    source = select.args.get("from_")
    if source is None or not isinstance(source.this, exp.Subquery):
        return None
    if any(select.args.get(k) for k in ("where", "joins", "group", "having", "distinct")):
        return None
    items = select.expressions
    if not items or not isinstance(items[0], exp.Star):
        return None
    if not all(isinstance(i, exp.Alias) and is_literal(i.this) for i in items[1:]):
        return None
    return source.this


def is_literal(expression: exp.Expr) -> bool:
    return isinstance(expression, exp.Literal | exp.Boolean | exp.Null)


def on_or_where(
    join: exp.Join, index: int, other: str, names: list[str], nullable: set[str]
) -> int | None | bool:
    """Where a semi-join filter on ``other`` from an equality in the ON of join ``index``
    goes: ``None`` (WHERE), ``index`` (that ON) or ``False`` (nowhere)."""
    side = (join.side or "").upper()
    if not side:
        return None if other not in nullable else index
    if side == "LEFT" and other == names[index + 1]:
        return index
    if side == "RIGHT" and other in names[: index + 1]:
        return index
    return False


def implied_on(condition: exp.Expr, alias: str) -> exp.Expr | None:
    """A condition on the columns of ``alias`` alone that every row satisfying
    ``condition`` satisfies (None: none found). A conjunction keeps the parts that are on
    ``alias`` alone; a disjunction, when each branch implies one, their disjunction: a row
    that makes a branch TRUE makes that branch's implied part TRUE, NULLs included.

    >>> from sqlglot import parse_one
    >>> implied_on(parse_one("(p.b = 1 AND l.q < 5) OR (p.b = 2 AND p.s > 3)"), "p").sql()
    'p.b = 1 OR (p.b = 2 AND p.s > 3)'
    >>> implied_on(parse_one("(p.b = 1 AND l.q < 5) OR l.q > 9"), "p") is None
    True
    """
    if isinstance(condition, exp.Paren):
        return implied_on(condition.this, alias)
    if isinstance(condition, exp.And):
        parts = [implied_on(c, alias) for c in condition.flatten()]
        kept = [p for p in parts if p is not None]
        return exp.and_(*kept) if kept else None
    if isinstance(condition, exp.Or):
        branches = [implied_on(c, alias) for c in condition.flatten()]
        if any(b is None for b in branches):
            return None
        return exp.or_(*[b for b in branches if b is not None])
    columns = list(condition.find_all(exp.Column))
    if not columns or any(c.table != alias for c in columns):
        return None
    if condition.find(exp.Query, exp.AggFunc, exp.Window) is not None:
        return None
    return condition.copy()


def on_changes(condition: exp.Expr, alias: str) -> exp.Expr | None:
    """:func:`implied_on` ``alias``, spelled on the changed rows as ``_ivm_d`` reads them.

    >>> from sqlglot import parse_one
    >>> on_changes(parse_one("p.b = 1 AND p.k = l.k"), "p").sql()
    '_ivm_d.b = 1'
    """
    implied = implied_on(condition, alias)
    if implied is None:
        return None
    for column in implied.find_all(exp.Column):
        column.set("table", exp.to_identifier("_ivm_d"))
    return implied


KEY_FILTER = "ivm_key_filter"  # meta flag of the key filters the operators make


def key_in(expression: exp.Expr, query: exp.Query) -> exp.In:
    """``expression IN (query)``, marked as a key filter of the changed keys (a cheap query
    of them): :meth:`Term.carried_filters` carries only those, never a view's own ``IN``,
    whose query may read a whole table."""
    condition = exp.In(this=expression.copy(), query=exp.Subquery(this=query))
    condition.meta[KEY_FILTER] = True
    return condition


def row_columns(rows: exp.Expr) -> set[str] | None:
    """The column names a query of rows has, or ``None`` when it selects ``*`` (all the
    relation's columns, unknown here).

    >>> from sqlglot import parse_one
    >>> sorted(row_columns(parse_one("SELECT a AS k, b FROM t")))
    ['b', 'k']
    >>> row_columns(parse_one("SELECT * FROM t")) is None
    True
    """
    if not isinstance(rows, exp.Query):
        return None
    selected = rows.named_selects
    return None if "*" in selected else set(selected)
