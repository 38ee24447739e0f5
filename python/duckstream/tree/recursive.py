"""Recursive CTE: ``R = B ∪ S(R)``, the base term ``B`` and a linear recursive term ``S``
(``S`` reads ``R`` once, joined by inner joins to relations ``E1 … En``; see
``normalize.recursive_ctes`` for what is taken). ``S_new``/``S_old``: ``S`` over the ``Ei`` at
the refresh's end snapshot / at the cursor; ``S|R:=X``: ``S`` reading ``X`` for ``R``.

Delta rule, UNION ALL (bag: a row once per derivation, so several paths in a DAG give several
rows). ``S`` is linear in ``R``, so ``S_new(R_old + ΔR) = S_new(R_old) + S_new(ΔR)`` and

    ΔR = ΔB + (S_new(R_old) − S_old(R_old)) + S_new(ΔR)
       = Σ_k S_new^k( ΔB + ΔS|R:=R_old )

with signed multiplicities: the seeds are the base term's delta and the recursive term's
delta over its other relations with ``R`` held at its old state (the join's ordered rule,
``Σ_i R_old ⋈ E1_new … ΔEi … En_old``), and each seed is carried along new edges (semi-naive
evaluation; deletions are negative seeds carried the same way, exactly). Evaluated by the
engine's own ``WITH RECURSIVE ... UNION ALL``.

Delta rule, UNION (set semantics), delete and rederive (DRed) with semi-naive insertion:

    D  = lfp X. ((neg(ΔB) ∪ neg(ΔS|R:=R_old)) ∪ S_old(X)) ∩ R_old    over-deleted
    K  = R_old − D                                                      surely kept
    A  = lfp Y. ((pos(ΔB) ∪ pos(ΔS|R:=K) ∪ (B_new ∩ D) ∪ (S_new(K) ∩ D)) ∪ S_new(Y)) − K
    ΔR = A − D  (+1)   ∪   D − A  (−1)

``neg``/``pos``: the rows with a negative entry / a positive net count. ``D`` holds every old
row a deleted row or edge helped derive (a superset of what goes); the rows of ``D`` still
derivable come back in ``A`` (``B_new ∩ D``, ``S_new(K) ∩ D``) with the newly derivable
ones (``pos``). Every seed is in ``R_new`` and ``R_new = K ∪ A``. On an append ``D`` is empty
and ``A`` is plain semi-naive evaluation from the new rows.

R_old is the view's own table where the view is R's rows as they are (``SELECT <R's
columns> FROM r``: the table holds R at the cursor, read before the refresh writes it), else
R recomputed from the sources at the cursor.

Depth: a UNION ALL recursion runs at most ``ctx.max_recursion_depth`` steps; a row derived
one step deeper (a cycle never ends under UNION ALL) makes the query fail with an error that
says so, never a truncated table. A UNION recursion stops when a step finds no new row.

Example (UNION ALL, reachability from 1 over edges e): e = {1→2, 2→3}, R = {1, 2, 3}
(B = {1}). Insert 1→3: ΔS|R:=R_old = {3: +1} (R_old's 1 along 1→3), carried along the new
edges (3 has none): ΔR = {3: +1}, R = {1, 2, 3, 3}: two paths reach 3, two rows.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Source, Version
from duckstream.expressions import aliased, ident
from duckstream.recursion import BOUND
from duckstream.tree.base import Context, Leaf, Relation, union_all
from duckstream.tree.project import Project

DEPTH = "_ivm_depth"


@dataclass
class SelfReference(Leaf):
    """The recursive term's reference to the CTE: it reads whatever relation the operator
    puts there while it builds one query (:meth:`reading`), under the user's alias."""

    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "R's own changes, carried by the recursive CTE above it"
    alias_node: exp.TableAlias
    relation: exp.Expr | None = None

    @property
    def name(self) -> str:
        return self.alias_node.name

    def sources(self) -> list[Source]:
        return []  # the join takes no delta of it: the operator carries R's changes itself

    @contextmanager
    def reading(self, relation: exp.Expr) -> Generator[None]:
        previous, self.relation = self.relation, relation
        try:
            yield
        finally:
            self.relation = previous

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        assert self.relation is not None, "the recursive reference read outside its operator"
        relation = self.relation.copy()
        relation.set("alias", exp.TableAlias(this=exp.to_identifier(self.name)))
        return relation

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        raise AssertionError("the recursive reference has no delta of its own")


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name))


def _cte(name: str, columns: Sequence[str], query: exp.Expr) -> exp.CTE:
    alias = exp.TableAlias(this=exp.to_identifier(name), columns=[ident(c) for c in columns])
    return exp.CTE(this=query, alias=alias)


def _with(ctes: list[exp.CTE], query: exp.Select, bound: tuple[int, str]) -> exp.Select:
    """``WITH RECURSIVE ctes query``, marked with its depth bound and the error beyond it
    (:data:`~duckstream.recursion.BOUND`: an engine that iterates the recursion stops there)."""
    with_ = exp.With(expressions=ctes, recursive=True)
    with_.meta[BOUND] = bound
    query.set("with_", with_)
    return query


def _all(name: str, alias: str | None = None) -> exp.Select:
    """``SELECT * FROM name`` (aliased)."""
    table = _table(name)
    if alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return exp.select("*").from_(table)


def _wrapped(query: exp.Query, alias: str) -> exp.Select:
    """``SELECT * FROM (query) AS alias``: a set operation kept whole inside another."""
    return exp.select("*").from_(aliased(query, alias))


def _set_op(kind: type[exp.SetOperation], left: exp.Query, right: exp.Query) -> exp.Select:
    """``SELECT * FROM (left <kind> right)``, set semantics (rows compared NULL-safely)."""
    return _wrapped(kind(this=left, expression=right, distinct=True), "_ivm_o")


@dataclass
class RecursiveCTE(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "UNION ALL: Σk S_new^k(ΔB + ΔS|R:=R_old) (semi-naive, signed); UNION: delete and"
        " rederive, then semi-naive insertion from the kept rows"
    )
    base: Relation
    step: Project  # over a block whose leaves include ``reference``
    reference: SelfReference
    names: list[str]
    distinct: bool  # UNION (set semantics) rather than UNION ALL
    name: str = field(default="r")
    # a query of R's rows at the cursor that costs no recursion: the view's own table, when
    # the view is this CTE's rows as they are (set by the compiler, :func:`read_old_from`)
    old_rows: exp.Query | None = None

    def sources(self) -> list[Source]:
        return [*self.base.sources(), *self.step.sources()]

    def columns(self) -> list[str]:
        return list(self.names)

    # -- building blocks -----------------------------------------------------------------
    def _names(self, ctx: Context, *kinds: str) -> list[str]:
        ctx.counter += 1
        return [f"_ivm_{k}{ctx.counter}" for k in kinds]

    def _over(
        self,
        ctx: Context,
        version: Version,
        relation: str,
        extra: Sequence[exp.Expr] = (),
        where: Sequence[exp.Expr] = (),
    ) -> list[exp.Select]:
        """``S`` at ``version`` reading the CTE ``relation`` for R: one query per term."""
        with self.reference.reading(_table(relation)):
            terms = self.step.input.state_terms(ctx, version)
        return [t.filtered(*where).select(*self.step.items, *extra) for t in terms]

    def _step_delta(self, ctx: Context, relation: str) -> list[exp.Select]:
        """``S_new(X) − S_old(X)`` for the CTE ``relation`` X: the recursive term's delta over
        its other relations (none when none of them changes)."""
        with self.reference.reading(_table(relation)):
            terms = self.step.input.delta_terms(ctx)
        return [t.select(*self.step.items, exp.alias_(t.multiplicity(), MULT)) for t in terms]

    def _old(self, ctx: Context) -> exp.Query:
        """R at the cursor: the view's table when it holds R as it is, else recomputed."""
        if self.old_rows is not None:
            return self.old_rows.copy()
        return self.state(ctx, Version.OLD)

    def _mult(self) -> exp.Column:
        return exp.column(MULT, table=self.reference.name)

    def _bound(self, ctx: Context) -> tuple[int, str]:
        """The depth bound and the error beyond it."""
        message = (
            f"duckstream: recursive CTE {self.name} ran more than {ctx.max_recursion_depth}"
            " steps (max_recursion_depth); under UNION ALL a cycle never ends: use UNION, or"
            " raise the setting"
        )
        return ctx.max_recursion_depth, message

    def _depth_check(self, ctx: Context) -> exp.Expr:
        """TRUE, or the engine's error once a row is deeper than the setting allows."""
        limit = exp.Literal.number(ctx.max_recursion_depth)
        message = self._bound(ctx)[1]
        too_deep = exp.GT(this=exp.column(DEPTH), expression=limit)
        return exp.Case(ifs=[exp.If(this=too_deep, true=ctx.engine.raise_error(message))]).else_(
            exp.true()
        )

    def _deeper(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        """The step's depth item and its bound (a row one step past the limit still comes,
        for the check to see)."""
        depth = exp.column(DEPTH, table=self.reference.name)
        item = exp.alias_(exp.Add(this=depth, expression=exp.Literal.number(1)), DEPTH)
        bound = exp.LTE(this=depth.copy(), expression=exp.Literal.number(ctx.max_recursion_depth))
        return item, bound

    # -- the relation --------------------------------------------------------------------
    def state(self, ctx: Context, version: Version) -> exp.Query:
        (name,) = self._names(ctx, "r")
        base = _wrapped(self.base.state(ctx, version), "_ivm_b")
        if self.distinct:
            body = exp.union(base, union_all(self._over(ctx, version, name)), distinct=True)
            return _with([_cte(name, self.names, body)], _all(name), self._bound(ctx))
        base.select(exp.alias_(exp.Literal.number(0), DEPTH), copy=False)
        item, bound = self._deeper(ctx)
        step = union_all(self._over(ctx, version, name, [item], [bound]))
        body = exp.union(base, step, distinct=False)
        query = exp.select(*(exp.column(ident(c)) for c in self.names)).from_(_table(name))
        query.where(self._depth_check(ctx), copy=False)
        return _with([_cte(name, [*self.names, DEPTH], body)], query, self._bound(ctx))

    def delta(self, ctx: Context) -> exp.Query:
        return self._set_delta(ctx) if self.distinct else self._bag_delta(ctx)

    def _bag_delta(self, ctx: Context) -> exp.Query:
        old, found = self._names(ctx, "old", "rd")
        seeds: list[exp.Query] = [self.base.delta(ctx)]
        changed = self._step_delta(ctx, old)
        seeds += changed
        anchor = _wrapped(
            union_all([_wrapped(s, f"_ivm_s{i}") for i, s in enumerate(seeds)]), "_ivm_seed"
        )
        anchor.select(exp.alias_(exp.Literal.number(0), DEPTH), copy=False)
        item, bound = self._deeper(ctx)
        mult = exp.alias_(self._mult(), MULT)
        step = union_all(self._over(ctx, Version.NEW, found, [mult, item], [bound]))
        ctes = [_cte(old, self.names, self._old(ctx))] if changed else []
        ctes.append(
            _cte(found, [*self.names, MULT, DEPTH], exp.union(anchor, step, distinct=False))
        )
        columns = [exp.column(ident(c)) for c in [*self.names, MULT]]
        query = exp.select(*columns).from_(_table(found)).where(self._depth_check(ctx))
        return _with(ctes, query, self._bound(ctx))

    def _set_delta(self, ctx: Context) -> exp.Query:
        old, based, stepped, over, kept, found = self._names(
            ctx, "old", "based", "stepped", "over", "kept", "found"
        )
        columns = [exp.column(ident(c)) for c in self.names]
        mult = exp.column(MULT)

        def rows(name: str, condition: exp.Expr | None = None, net: bool = False) -> exp.Select:
            query = exp.select(*(c.copy() for c in columns)).from_(_table(name))
            if condition is not None:
                query = query.where(condition)
            if net:  # the rows whose net count grows
                query = query.group_by(*(c.copy() for c in columns)).having(
                    exp.GT(this=exp.Sum(this=mult.copy()), expression=exp.Literal.number(0))
                )
            return query

        def stacked(queries: list[exp.Select], empty_like: str) -> exp.Query:
            if not queries:  # nothing changes there: no rows, typed as ``empty_like``
                return exp.select("*").from_(_table(empty_like)).where(exp.false())
            return union_all([_wrapped(q, f"_ivm_s{i}") for i, q in enumerate(queries)])

        negative = exp.LT(this=mult.copy(), expression=exp.Literal.number(0))
        ctes = [
            _cte(old, self.names, self._old(ctx)),
            _cte(based, [*self.names, MULT], self.base.delta(ctx)),
        ]
        changed_old = self._step_delta(ctx, old)
        ctes.append(_cte(stepped, [*self.names, MULT], stacked(changed_old, based)))
        over_seeds = union_all([rows(based, negative), rows(stepped, negative.copy())])
        over_anchor = _set_op(exp.Intersect, _wrapped(over_seeds, "_ivm_n"), _all(old))
        over_step = _set_op(exp.Intersect, union_all(self._over(ctx, Version.OLD, over)), _all(old))
        ctes.append(_cte(over, self.names, exp.union(over_anchor, over_step, distinct=True)))
        ctes.append(_cte(kept, self.names, _set_op(exp.Except, _all(old), _all(over))))
        changed_kept = self._step_delta(ctx, kept)
        seeds = [rows(based, net=True)]
        if changed_kept:
            positive = exp.select(*(c.copy() for c in columns)).from_(
                aliased(
                    union_all(changed_kept),
                    exp.TableAlias(
                        this=exp.to_identifier("_ivm_k"),
                        columns=[ident(c) for c in [*self.names, MULT]],
                    ),
                )
            )
            positive = positive.group_by(*(c.copy() for c in columns)).having(
                exp.GT(this=exp.Sum(this=mult.copy()), expression=exp.Literal.number(0))
            )
            seeds.append(positive)
        # the over-deleted rows still derivable: read only when some were over-deleted (on
        # an append none are, and these seeds would otherwise cost a full step over R)
        any_over = exp.Exists(this=exp.select(exp.Literal.number(1)).from_(_table(over)))
        new_base = _wrapped(self.base.state(ctx, Version.NEW), "_ivm_b").where(any_over)
        seeds.append(_set_op(exp.Intersect, new_base, _all(over)))
        rederived = self._over(ctx, Version.NEW, kept, where=[any_over])
        seeds.append(_set_op(exp.Intersect, union_all(rederived), _all(over)))
        anchor = _set_op(
            exp.Except,
            union_all([_wrapped(s, f"_ivm_a{i}") for i, s in enumerate(seeds)]),
            _all(kept),
        )
        step = _set_op(exp.Except, union_all(self._over(ctx, Version.NEW, found)), _all(kept))
        ctes.append(_cte(found, self.names, exp.union(anchor, step, distinct=True)))
        one = exp.cast(exp.Literal.number(1), exp.DataType.build("bigint"))
        minus = exp.cast(exp.Literal.number(-1), exp.DataType.build("bigint"))
        added = exp.select("*", exp.alias_(one, MULT)).from_(_table(found))
        removed = exp.select("*", exp.alias_(minus, MULT)).from_(_table(over))
        return _with(
            ctes,
            exp.select("*").from_(aliased(exp.union(added, removed, distinct=False), "_ivm_d")),
            self._bound(ctx),
        )


def read_old_from(relation: Relation, table: exp.Table, columns: list[str]) -> None:
    """Let ``relation``, a recursive CTE that the view's table holds as it is (``columns``,
    its columns in order, no other), read its old state from ``table``."""
    if isinstance(relation, RecursiveCTE) and columns == relation.names:
        relation.old_rows = exp.select(*(exp.column(ident(c)) for c in columns)).from_(table)
