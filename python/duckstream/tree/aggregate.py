"""Aggregate (GROUP BY / HAVING) inside a view, e.g. a derived table that is then filtered.

Delta rule, over the groups G that the input's delta touches:

    Δ(γ_G(R)) = γ_G(R_new ⋉ affected)  -  γ_G(R_old ⋉ affected)

i.e. the affected groups recomputed at the end snapshot (+1) and at the cursor (-1): exact for
every aggregate function, and cheap when few groups change. A view whose top operator is the
aggregate does better: it keeps per-group running state in the materialized table
(``duckstream.sinks.grouped``) and only rescans groups it cannot update from the delta.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Source, Version
from duckstream.expressions import aliased, parenthesized
from duckstream.tree.base import (
    Block,
    Context,
    Relation,
    Term,
    changed_flag,
    column_tables,
    union_all,
)
from duckstream.tree.key_filters import key_in, row_columns, states_unfiltered, uses_key_semijoins


def null_safe_match(left: Sequence[exp.Expr], right: Sequence[exp.Expr]) -> exp.Expr:
    """``l1 IS NOT DISTINCT FROM r1 AND ...`` (TRUE for no columns): NULL keys match NULL."""
    if not left:
        return exp.true()
    return exp.and_(
        *(
            exp.NullSafeEQ(this=a.copy(), expression=b.copy())
            for a, b in zip(left, right, strict=True)
        )
    )


def grouped(query: exp.Select, groups: Sequence[exp.Expr]) -> exp.Select:
    """``query GROUP BY groups``, never by position.

    Both engines read an integer literal in GROUP BY as a select-list position, so a constant
    group key (``SELECT DISTINCT k, 5 AS c``) is left out of GROUP BY: a constant does not
    split groups, and the select list may use it without grouping by it. Only when every key
    is constant does the query keep one group *if there are rows*: ``HAVING count(*) > 0``,
    since without GROUP BY an empty input would give one row.

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT k, 5 AS c FROM t")
    >>> grouped(q, [parse_one("k"), parse_one("5")]).sql()
    'SELECT k, 5 AS c FROM t GROUP BY k'
    >>> grouped(parse_one("SELECT 'x' AS c FROM t"), [parse_one("'x'")]).sql()
    "SELECT 'x' AS c FROM t HAVING COUNT(*) > 0"
    """
    if not groups:
        return query
    varying = [g.copy() for g in groups if not is_constant(g)]
    if varying:
        return query.group_by(*varying)
    return query.having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)))


def is_constant(expression: exp.Expr) -> bool:
    """No column, no aggregate, no subquery: the same value on every row (the view's
    functions are deterministic, see ``normalize.validate``)."""
    return not any(
        isinstance(n, exp.Column | exp.AggFunc | exp.Query | exp.Placeholder)
        for n in expression.walk()
    )


def group_key_names(count: int) -> list[str]:
    return [f"_ivm_g{i}" for i in range(count)]


def affected_groups(
    ctx: Context,
    block: Block,
    groups: list[exp.Expr],
    wanted: dict[int, exp.Query] | None = None,
) -> exp.Query:
    """The distinct group keys of the input's delta rows (``_ivm_g0`` ...), or one row when the
    aggregate has no GROUP BY and anything changed; ``wanted``: only the keys whose group
    ``i`` is among the values of ``wanted[i]`` (:mod:`duckstream.tree.demand`)."""
    names = group_key_names(len(groups))
    terms = block.key_terms(ctx, column_tables(groups))
    if groups:
        query = union_all(
            [
                t.select(*(exp.alias_(g, n) for g, n in zip(groups, names, strict=True)))
                for t in terms
            ]
        )
    else:
        query = union_all([t.select(exp.alias_(exp.Literal.number(1), "_ivm_one")) for t in terms])
    keys = exp.select(*(names or ["_ivm_one"])).distinct().from_(parenthesized(query, "_ivm_delta"))
    for i, values in sorted((wanted or {}).items()):
        among = exp.In(this=exp.column(names[i]), query=exp.Paren(this=values.copy()))
        keys = keys.where(among, copy=False)
    return keys


def changed_group_keys(
    ctx: Context, block: Block, groups: list[exp.Expr], items: list[exp.Expr], names: list[str]
) -> exp.Query | None:
    """The affected groups as the grouping operator's own key columns (each output column
    that is a group expression as written), when the input reads one source whose changes
    are cheap to read again (:meth:`Block.reads_changes_only`); else ``None``. Every row of
    the operator's delta (:func:`regroup_delta`) is of an affected group, so these hold
    every key value that delta has: what a join of the delta needs to filter its other
    relations by (:meth:`Leaf.delta_rows`).

    Or, over one relation whose changed rows are cheap (:meth:`Block.changed_rows`: a derived
    table grouped by its keys, whose affected groups are known in turn; TPC-H Q18's ``IN``
    subquery, a DISTINCT of an aggregate): the output columns that are a group expression
    over that relation's columns, computed from those rows. Each group the delta touches is
    the group of one of the input's delta rows, a row of that relation's delta: its values
    are among the rows'."""
    if not groups:
        return None
    if not block.reads_changes_only(ctx):
        return _groups_of_changed_rows(ctx, block, groups, items, names)
    columns = []
    for item, name in zip(items, names, strict=True):
        expression = item.unalias() if isinstance(item, exp.Alias) else item
        found = [i for i, g in enumerate(groups) if g == expression and not is_constant(g)]
        if found:
            columns.append(exp.alias_(exp.column(f"_ivm_g{found[0]}"), name))
    if not columns:
        return None
    keys = parenthesized(affected_groups(ctx, block, groups), "_ivm_k")
    return exp.select(*columns).from_(keys)


def _groups_of_changed_rows(
    ctx: Context, block: Block, groups: list[exp.Expr], items: list[exp.Expr], names: list[str]
) -> exp.Query | None:
    """:func:`changed_group_keys` from the rows of :meth:`Block.changed_rows`."""
    found = block.changed_rows(ctx)
    if found is None:
        return None
    alias, rows = found
    has = row_columns(rows)
    columns = []
    for item, name in zip(items, names, strict=True):
        expression = item.unalias() if isinstance(item, exp.Alias) else item
        if not any(g == expression and not is_constant(g) for g in groups):
            continue
        read = {c.name for c in expression.find_all(exp.Column)}
        if column_tables([expression]) == {alias} and (has is None or read <= has):
            columns.append(exp.alias_(expression.copy(), name))
    if not columns:
        return None
    return exp.select(*columns).from_(aliased(rows.copy(), alias))


def restrict_to(
    term: Term,
    keys: exp.Expr,
    groups: Sequence[exp.Expr],
    names: list[str],
    never_null: frozenset[int] = frozenset(),
) -> list[Term]:
    """Keep only the rows of ``term`` whose group (``groups``, NULL-safe) is a row of the
    relation ``keys`` (columns ``names``): one term, or two that split its rows.

    The NULL-safe match is a correlated ``EXISTS``, and an engine decorrelates it by first
    finding the distinct groups of every input row (DuckDB: a "delim join" that groups the
    whole table). So the rows go first through uncorrelated filters implied by it, which
    cost a semi-join: those whose group expressions are all non-NULL must have each in its
    key column (``g IN (SELECT <name> FROM keys)``, a plain semi-join the engine can also
    use to skip the files and row groups of other keys); the others (some group is NULL)
    are a second term, kept apart by ``g IS NULL OR ...``. A group's rows share its key
    values, so the two terms never split a group. The same keys also prune the relations
    joined by an equality to a group column (``t.y IN (SELECT <key> FROM keys)`` for ``g.x
    = t.y``, see :meth:`Term.key_filters`): without them an engine scans those relations
    whole, since the restriction stands on the group's side only. ``never_null``: the groups
    (by position) that are never NULL in ``keys``: a row NULL in those has no group there,
    so the second term covers the others only, and is left out when none remain.

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT * FROM c LEFT JOIN o ON c.k = o.k")
    >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]))
    >>> keyed, nulls = restrict_to(term, exp.to_table("a"), [parse_one("c.k")], ["_ivm_g0"])
    >>> keyed.joins[0].args["on"].sql()
    'c.k = o.k AND o.k IN (SELECT _ivm_g0 FROM a AS _ivm_a)'
    >>> [c.sql() for c in keyed.where[:1] + nulls.where[:1]]
    ['c.k IN (SELECT _ivm_g0 FROM a AS _ivm_a)', 'c.k IS NULL']
    """
    columns = [exp.column(n, table="_ivm_a") for n in names]
    exists = exp.Exists(
        this=exp.select("1").from_(_keys_relation(keys)).where(null_safe_match(columns, groups))
    )
    keyed = [
        (group, name) for group, name in zip(groups, names, strict=True) if not is_constant(group)
    ]
    nullable: list[exp.Expr] = []
    if keyed and uses_key_semijoins():
        in_keys = [
            key_in(group, exp.select(name).from_(_keys_relation(keys))) for group, name in keyed
        ]
        nullable = [g for i, g in enumerate(groups) if not is_constant(g) and i not in never_null]
        # each also pushed into a derived table grouped by its key (TPC-H Q18's DISTINCT of
        # an aggregate: else the engine groups all of lineitem, at both snapshots, to keep
        # the changed orders); not into a source's state, which the filter already sits on
        with states_unfiltered():
            terms = [term.with_filters([(None, k) for k in in_keys]).filtered(exists)]
        if nullable:
            some_null = exp.or_(*(exp.Is(this=g.copy(), expression=exp.Null()) for g in nullable))
            nulls = term.filtered(some_null, exists)
            terms.append(_unmatched_by_null(nulls, nullable[0]) if len(nullable) == 1 else nulls)
    else:
        terms = [term.filtered(exists)]
    for group, name in zip(groups, names, strict=True):
        if not (isinstance(group, exp.Column) and group.table):
            continue

        def key_query(column: str, group=group, name=name) -> exp.Query | None:
            if column != group.name:
                return None
            return exp.select(name).from_(_keys_relation(keys))

        terms = [t.with_filters(t.key_filters(group.table, key_query)) for t in terms]
    return terms


def _unmatched_by_null(term: Term, group: exp.Expr) -> Term:
    """The term of the rows whose one nullable group ``group`` is NULL, with each relation
    joined to it by an equality filtered to no rows: ``t.y IN (SELECT NULL WHERE FALSE)``
    for ``g = t.y``, placed as :meth:`Term.key_filters` places it (implied: NULL equals
    nothing). An engine then reads nothing of ``t`` (DuckDB 1.5.5 scanned TPC-H Q13's
    orders in full for the NULL customer keys, a third of its append's refresh).

    >>> from sqlglot import parse_one
    >>> q = parse_one("SELECT * FROM c LEFT JOIN o ON c.k = o.k")
    >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]))
    >>> _unmatched_by_null(term, parse_one("c.k")).joins[0].args["on"].sql()
    'c.k = o.k AND o.k IN (SELECT NULL WHERE FALSE)'
    """
    if not (isinstance(group, exp.Column) and group.table):
        return term
    nothing = exp.select(exp.null()).where(exp.false())
    found = term.key_filters(group.table, lambda c: nothing.copy() if c == group.name else None)
    return term.with_filters(found)


def _keys_relation(keys: exp.Expr) -> exp.Expr:
    if isinstance(keys, exp.Table):
        return keys.copy().as_("_ivm_a")
    return parenthesized(keys.copy(), "_ivm_a")


def regroup_delta(
    ctx: Context,
    block: Block,
    groups: list[exp.Expr],
    close: Callable[[Term], exp.Select],
    wanted: dict[int, exp.Query] | None = None,
) -> exp.Query:
    """The state-diff delta of an operator that groups ``block`` by ``groups``.

    ``close(term) -> Select`` turns a term into the operator's query (select list, GROUP BY,
    HAVING); the result adds ``_ivm_mult`` +1 for the new state and -1 for the old one.
    ``wanted``: only the rows of the groups whose key ``i`` is among ``wanted[i]``'s values
    (a consumer that needs no others, :mod:`duckstream.tree.demand`): the groups are whole,
    so that is the delta of those groups; their keys are never NULL there.
    """
    ctx.counter += 1
    affected = f"_ivm_affected_{ctx.counter}"
    parts = []
    for version, sign in ((Version.NEW, 1), (Version.OLD, -1)):
        parts += regrouped(ctx, block, groups, close, affected, version, sign, wanted)
    query = union_all(parts)
    keys = affected_groups(ctx, block, groups, wanted)
    return query.with_(affected, as_=keys, copy=False)  # type: ignore[attr-defined]


def regrouped(
    ctx: Context,
    block: Block,
    groups: list[exp.Expr],
    close: Callable[[Term], exp.Select],
    affected: str | exp.Table,
    version: Version,
    sign: int,
    wanted: dict[int, exp.Query] | None = None,
) -> list[exp.Select]:
    """The groups of ``block`` whose keys are rows of the table ``affected`` (columns
    ``_ivm_g<i>``), recomputed at ``version``, each row with ``_ivm_mult`` ``sign``: one
    snapshot's half of :func:`regroup_delta`."""
    guard = changed_flag(ctx, [block])
    names = group_key_names(len(groups))
    parts = []
    for term in block.state_terms(ctx, version):
        never_null = frozenset(wanted or ())
        for restricted in restrict_to(term, exp.to_table(affected), groups, names, never_null):
            closed = close(
                Term(
                    from_=restricted.from_,
                    joins=restricted.joins,
                    where=restricted.where,
                    guards=(guard,),
                )
            )
            mult = exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))
            parts.append(
                exp.select("*", exp.alias_(mult, MULT)).from_(parenthesized(closed, "_ivm_g"))
            )
    return parts


def wanted_groups(
    groups: list[exp.Expr], items: list[exp.Expr], names: list[str], wanted: dict[str, exp.Query]
) -> dict[int, exp.Query]:
    """``wanted`` (values by output column) by group position: for the output columns that
    are a group expression as written (not a constant).

    >>> from sqlglot import parse_one
    >>> items = [parse_one("t.k AS k"), parse_one("sum(t.v) AS s")]
    >>> found = wanted_groups([parse_one("t.k")], items, ["k", "s"],
    ...     {"k": parse_one("SELECT 1"), "s": parse_one("SELECT 2")})
    >>> {i: q.sql() for i, q in found.items()}
    {0: 'SELECT 1'}
    """
    found: dict[int, exp.Query] = {}
    for item, name in zip(items, names, strict=True):
        if name not in wanted:
            continue
        expression = item.unalias() if isinstance(item, exp.Alias) else item
        for i, group in enumerate(groups):
            if group == expression and not is_constant(group):
                found.setdefault(i, wanted[name])
    return found


@dataclass
class Aggregate(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "γ(R_new ⋉ affected) − γ(R_old ⋉ affected): "
        "the groups the delta touches recomputed at both snapshots"
    )
    input: Block
    groups: list[exp.Expr]
    items: list[exp.Expr]
    names: list[str]
    having: exp.Expr | None = None

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def _close(self, term: Term) -> exp.Select:
        query = grouped(term.select(*self.items), self.groups)
        if self.having is not None:
            query = query.having(self.having.copy(), copy=False)
        return query

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return union_all([self._close(t) for t in self.input.state_terms(ctx, version)])

    def delta(self, ctx: Context) -> exp.Query:
        return regroup_delta(ctx, self.input, self.groups, self._close)

    def delta_keys(self, ctx: Context) -> exp.Query | None:
        return changed_group_keys(ctx, self.input, self.groups, self.items, self.names)

    def group_columns(self) -> dict[str, int] | None:
        """Each output column that is a group expression as written, by the group's position,
        when every group that is not a constant is one (a row's values then name its group);
        else ``None``."""
        found: dict[str, int] = {}
        for item, name in zip(self.items, self.names, strict=True):
            expression = item.unalias() if isinstance(item, exp.Alias) else item
            for i, group in enumerate(self.groups):
                if group == expression and not is_constant(group) and i not in found.values():
                    found[name] = i
                    break
        varying = {i for i, g in enumerate(self.groups) if not is_constant(g)}
        return found if varying and set(found.values()) == varying else None

    def touched(self, ctx: Context) -> exp.Query:
        """The keys of the groups the input's delta touches (``_ivm_g<i>``)."""
        return affected_groups(ctx, self.input, self.groups)

    def regrouped_at(self, ctx: Context, touched: str | exp.Table, version: Version) -> exp.Query:
        """The rows of the groups whose keys are rows of the table ``touched``, at
        ``version`` (``_ivm_mult`` 1 each)."""
        parts = regrouped(ctx, self.input, self.groups, self._close, touched, version, 1)
        return union_all(parts)

    def delta_within(self, ctx: Context, wanted: dict[str, exp.Query]) -> exp.Query | None:
        found = wanted_groups(self.groups, self.items, self.names, wanted)
        if not found:
            return None
        return regroup_delta(ctx, self.input, self.groups, self._close, found)
