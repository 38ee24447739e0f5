"""Which source tables a refresh scans, and when: what the cost model of ``strategy='auto'``
(:mod:`duckstream.strategy`) weighs, read from a compiled plan's own expression trees.

An incremental refresh reads each changed source's change feed, and its delta terms scan
source tables (at the cursor snapshot or at the window's end). Every term is guarded by the
flags of the sources whose changes it applies (``WHERE <changed_i> AND ...``, or
``<changed_i> OR <changed_j>`` when the changes of any of several sources affect it): when a
flag is false at run time the engine's optimizer drops the term and its scans.
:func:`source_reads` lists every scan of a source with the guards around it, so a view whose
terms scan a table several times shows every scan: a subquery decorrelated into a grouped or
DISTINCT derived table recomputes its affected groups at both snapshots, and a table read in
the outer query and in the subquery is joined to its own changes.

A scan is also marked *whole* when it is aggregated (GROUP BY, DISTINCT, an aggregate) before
anything restricts it to rows related to the changes: a derived table of a decorrelated
subquery that a term joins to a change after grouping all of it, or a global aggregate that
is recomputed. No key of the change prunes such a scan; the others are restricted by a join
with the changes, or with keys derived from them, or by ``x IN (...)`` / a correlated
``EXISTS (...)`` over them.

>>> from duckstream.engines.base import Source
>>> t, u = Source("c", "s", "t", 0), Source("c", "s", "u", 1)
>>> flag = {"c.s.t": exp.column("changed_t"), "c.s.u": exp.column("changed_u")}
>>> term = exp.select("*").from_(u.table()).where(exp.and_(flag["c.s.t"], "x > 1"))
>>> grouped = exp.select("count(*)").from_(u.table()).where(flag["c.s.u"])
>>> steps = [CreateTemp(exp.to_table("d"), term), CreateTemp(exp.to_table("g"), grouped)]
>>> reads = source_reads(steps, [t, u], flag.get)
>>> reads[0]
Read(table='c.s.u', when=(frozenset({'c.s.t'}),), whole=False)
>>> reads[0].runs({"c.s.u"}), reads[0].runs({"c.s.t"}), reads[1].whole
(False, True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from duckstream.plan import CreateTemp, Iterate, Read, Step

if TYPE_CHECKING:  # the engines' package reads its guards (engines.ducklake.old_states)
    from duckstream.engines.base import Source


def source_reads(
    steps: Sequence[Step | exp.Expr],
    sources: Sequence[Source],
    changed: Callable[[str], exp.Expr | None],
) -> list[Read]:
    """Every scan of a source in ``steps`` -- expression trees, or the trees of
    :class:`CreateTemp` steps (where ``maintain`` reads its sources; its plain statements
    write the view and its cursors) -- with its guards. ``changed(fqn)``: the engine's
    expression for "this source changed in the window" (``Engine.changed``), matched
    structurally."""
    by_key = {(s.catalog, s.schema, s.name): s.fqn for s in sources}
    flags: dict[exp.Expr, str] = {}
    for s in sources:
        flag = changed(s.fqn)
        if flag is not None:
            flags[flag] = s.fqn
    reads = []
    for step in steps:
        if isinstance(step, CreateTemp) and step.changes_of is not None:
            # A change copy reads the feed, weighed on its own by the cost model; the time
            # travel in it re-reads only rowids a snapshot lists twice, a handful at most.
            continue
        if isinstance(step, Iterate):  # a recursion iterated: its base and recursive terms
            trees: list[object] = [step.base, step.step]
        else:
            trees = [step.query if isinstance(step, CreateTemp) else step]
        for table in (
            t for tree in trees if isinstance(tree, exp.Expr) for t in tree.find_all(exp.Table)
        ):
            name = by_key.get((table.catalog, table.db, table.name))
            if name is not None and not _only_nulls(table):
                reads.append(Read(name, guards_around(table, flags), _whole(table, by_key)))
    return reads


def _only_nulls(table: exp.Table) -> bool:
    """Whether the scan of ``table`` keeps only rows with a NULL key: the NULL-key part of
    a restriction to keys (:func:`duckstream.tree.aggregate.restrict_to`), a WHERE with
    ``g1 IS NULL OR g2 IS NULL ...`` beside the NULL-safe ``EXISTS`` matching exactly those
    ``g`` (and constants). Engines skip the files and row groups whose statistics count no
    NULL there, so it is left out of the scans weighed (its keyed twin is weighed)."""

    def tested(condition: exp.Expr) -> list[exp.Expr] | None:
        condition = condition.unnest()
        if isinstance(condition, exp.Or):
            left, right = tested(condition.left), tested(condition.right)
            return left + right if left is not None and right is not None else None
        if isinstance(condition, exp.Is) and isinstance(condition.expression, exp.Null):
            return [condition.this]
        return None

    def matched(condition: exp.Expr) -> list[exp.Expr] | None:
        if not isinstance(condition, exp.Exists):
            return None
        where = condition.this.args.get("where") if isinstance(condition.this, exp.Select) else None
        if where is None:
            return None
        pairs = list(_conjuncts(where.this))
        if not all(isinstance(p, exp.NullSafeEQ) for p in pairs):
            return None
        return [p.expression for p in pairs if p.expression.find(exp.Column) is not None]

    parent = table.parent
    while parent is not None:
        where = parent.args.get("where") if isinstance(parent, exp.Select) else None
        if isinstance(where, exp.Where):
            conditions = list(_conjuncts(where.this))
            keys = [k for c in conditions if (k := matched(c)) is not None]
            for c in conditions:
                nulls = tested(c)
                if nulls and any(
                    sorted(n.sql() for n in nulls) == sorted(k.sql() for k in key) for key in keys
                ):
                    return True
        parent = parent.parent
    return False


def guards_around(node: exp.Expr, flags: dict[exp.Expr, str]) -> tuple[frozenset[str], ...]:
    """The guard clauses of the queries around ``node``: each conjunct of an enclosing WHERE
    made only of change flags (one flag, or a disjunction of flags)."""
    clauses: list[frozenset[str]] = []
    parent = node.parent
    while parent is not None:
        where = parent.args.get("where") if isinstance(parent, exp.Select) else None
        if isinstance(where, exp.Where):
            for conjunct in _conjuncts(where.this):
                clause = _clause(conjunct, flags)
                if clause:
                    clauses.append(clause)
        parent = parent.parent
    return tuple(dict.fromkeys(clauses))


def _conjuncts(condition: exp.Expr) -> Iterator[exp.Expr]:
    condition = condition.unnest()
    if isinstance(condition, exp.And):
        yield from _conjuncts(condition.left)
        yield from _conjuncts(condition.right)
    else:
        yield condition


def _clause(condition: exp.Expr, flags: dict[exp.Expr, str]) -> frozenset[str] | None:
    """The sources of a condition made only of change flags joined by OR; None otherwise."""
    condition = condition.unnest()
    if isinstance(condition, exp.Or):
        left, right = _clause(condition.left, flags), _clause(condition.right, flags)
        return left | right if left is not None and right is not None else None
    if not any(type(condition) is type(flag) for flag in flags):
        return None  # not a flag (and hashing a big condition to look it up costs)
    name = flags.get(condition)
    return frozenset({name}) if name is not None else None


def _whole(table: exp.Table, sources: dict[tuple[str, str, str], str]) -> bool:
    """Whether the scan of ``table`` is aggregated before anything restricts it to rows
    related to the changes (see the module docstring). Walks out from the scan through the
    queries whose FROM holds it, up to the first one that aggregates."""

    def from_changes(node: exp.Expr) -> bool:  # reads a table that is not a source
        return any((t.catalog, t.db, t.name) not in sources for t in node.find_all(exp.Table))

    child: exp.Expr = table
    parent = table.parent
    while parent is not None:
        if isinstance(parent, exp.Select) and child.arg_key in ("from_", "joins"):
            others = [parent.args.get("from_"), *(parent.args.get("joins") or [])]
            if any(r is not None and r is not child and from_changes(r) for r in others):
                return False
            where = parent.args.get("where")
            if where is not None and any(
                _restricts(c, from_changes) for c in _conjuncts(where.this)
            ):
                return False
            if _aggregates(parent):
                return True
        child, parent = parent, parent.parent
    return False


def _restricts(condition: exp.Expr, from_changes: Callable[[exp.Expr], bool]) -> bool:
    """``x IN (<a query over the changes>)``, or ``EXISTS (<a query over the changes>)``
    correlated with the query around it."""
    if isinstance(condition, exp.In) and condition.args.get("query") is not None:
        return from_changes(condition.args["query"])
    if isinstance(condition, exp.Exists) and from_changes(condition.this):
        inner = condition.this
        names = {t.alias_or_name for t in inner.find_all(exp.Table)}
        names |= {s.alias for s in inner.find_all(exp.Subquery) if s.alias}
        return any(c.table and c.table not in names for c in inner.find_all(exp.Column))
    return False


def _aggregates(select: exp.Select) -> bool:
    """GROUP BY, DISTINCT, or an aggregate function in its own select list."""
    if select.args.get("group") is not None or select.args.get("distinct") is not None:
        return True
    return any(
        isinstance(node, exp.AggFunc)
        for item in select.expressions
        for node in item.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Select))
    )
