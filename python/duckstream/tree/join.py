"""Joins of the leaves of one FROM clause: inner, LEFT, RIGHT, FULL, CROSS and comma joins.

The FROM clause is a left-deep chain ``J_k = J_(k-1) op_k R_k`` (``J_0 = R_0``); each step
is differentiated on its own, with signed multiplicities, ``_old`` the state at the cursor
and ``_new`` at the refresh's end snapshot:

    Δ(J ⋈ R) = ΔJ ⋈ R_old + J_new ⋈ ΔR
    Δ(J ⟕ R) = ΔJ ⟕ R_old + J_new ⋈ ΔR + L(J_new, R_new) - L(J_new, R_old)
    Δ(J ⟖ R) = ΔJ ⋈ R_old + J_new ⟖ ΔR + R(J_new, R_old) - R(J_old, R_old)
    Δ(J ⟗ R) = ΔJ ⟕ R_old + J_new ⟖ ΔR + L(J_new, R_new) - L(J_new, R_old)
                                       + R(J_new, R_old) - R(J_old, R_old)

``L(J, R)`` are the rows of ``J`` with no partner in ``R``, NULL-extended (``J ⟕ R`` where
``R`` is absent), ``R(J, R)`` the rows of ``R`` with no partner in ``J``. A LEFT join is
linear in its preserved side, so ``J_new ⟕ R_new - J_old ⟕ R_old = ΔJ ⟕ R_old + (J_new ⟕
R_new - J_new ⟕ R_old)``, and the bracket is the inner part ``J_new ⋈ ΔR`` plus the change of
the unmatched rows; FULL is LEFT plus the right-unmatched rows (Larson & Zhou, ICDE 2007).
Only a row of ``J`` with a partner among ΔR's rows can flip between matched and unmatched,
so the ``L`` terms read only those (``J.a IN (SELECT b FROM ΔR)`` for each equality ``a =
b`` of the ON clause; without one they read all of ``J``, still exact), and the ``R`` terms
only the rows of ``R`` with a partner among ΔJ's rows. Absence is tested on a marker column
the terms add to the null-supplying leaves. For inner chains the rule is the ordered one,
``Σ_i R1_new ⋈ … ⋈ ΔRi ⋈ R(i+1)_old ⋈ …``, which stays right when partners on both sides
change in one window (delete r and its only partner s: ``ΔR ⋈ S_old`` still sees s).

Where the engine cannot prune a state's scan by a semi-join to the changes (Spark + Iceberg),
a delta term ``ΔR ⋈ S`` joined by ``R.x = S.y`` also bounds ``S.y`` by the least and the
greatest ``x`` in ΔR, run-time constants of the refresh (``Term.range_filters``): implied by
the equality, and a range a table scan can skip data files by. Example: appended orders of
keys 6,000,001..6,000,150 read lineitem at the cursor as ``l_orderkey BETWEEN 6000001 AND
6000150``, the files of new keys only.

Each term is the FROM clause as written with its leaves filled in (a state, the changes, a
marked state) and some joins evaluated as another kind; ΔJ's terms only ever stand on the
preserved side of a LEFT or inner join, so their WHERE conditions apply on top unchanged.
Every term is guarded by "a source under the changed side changed": an unchanged side costs
nothing at run time.

Example: ``r ⟕ s`` with r = {1}, s = {1} holds (1, 1). Delete s's row: ``J_new ⋈ ΔS`` gives
(1, 1) at -1 and ``L(J_new, S_new)`` gives (1, NULL) at +1 (``L(J_new, S_old)`` is empty).

>>> from sqlglot import parse_one
>>> [join_kind(j) for j in parse_one("SELECT * FROM a LEFT OUTER JOIN b ON a.k = b.k "
...     "FULL JOIN c ON b.k = c.k, d").args["joins"]]
['left', 'full', 'inner']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.expressions import aliased, conjuncts
from duckstream.tree.base import (
    Block,
    Context,
    Leaf,
    Term,
    changed_flag,
    changes,
    column_tables,
    state_gates,
    union_all,
)
from duckstream.tree.demand import narrow_delta
from duckstream.tree.key_filters import (
    KeyRange,
    key_in,
    push_key_filter,
    row_columns,
    uses_key_semijoins,
)
from duckstream.tree.lateral_subquery import LateralSubquery

INNER, LEFT, RIGHT, FULL = "inner", "left", "right", "full"
MARK = "_ivm_present"


def join_kind(join: exp.Join) -> str:
    """``inner`` (also CROSS and comma joins), ``left``, ``right`` or ``full``."""
    side = (join.side or "").lower()
    return side if side in (LEFT, RIGHT, FULL) else INNER


def _set_kind(join: exp.Join, kind: str) -> None:
    join.set("side", None if kind == INNER else kind.upper())
    join.set("kind", None)


def _marked(relation: exp.Expr, alias: str) -> exp.Expr:
    """``(SELECT *, TRUE AS _ivm_present FROM relation) AS alias``: NULL when NULL-extended."""
    query = exp.select(exp.Star(), exp.alias_(exp.true(), MARK)).from_(relation)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _absent(alias: str) -> exp.Expr:
    return exp.Is(this=exp.column(MARK, table=alias), expression=exp.null())


def _tables(expression: exp.Expr) -> frozenset[str] | None:
    """The aliases an expression's columns name; ``None`` if it names none, one is
    unqualified, or it holds a subquery or an aggregate (then it is no use for restricting
    rows)."""
    if expression.find(exp.AggFunc):
        return None
    return column_tables([expression]) or None


@dataclass(frozen=True)
class _Part:
    """A term over the first ``len(relations)`` leaves of the FROM clause."""

    relations: tuple[exp.Expr, ...]
    kinds: tuple[str, ...]  # how each join step so far is evaluated
    on: tuple[exp.Expr | None, ...] = ()  # per join step: a conjunct added to its ON
    where: tuple[exp.Expr, ...] = ()
    mult: exp.Expr | None = None
    guards: tuple[exp.Expr, ...] = ()
    delta_alias: str | None = None
    delta_rows: exp.Expr | None = None
    narrow: Callable[[Term], Term] | None = None
    delta_range: Callable[[str], KeyRange | None] | None = None

    def extend(self, relation: exp.Expr, kind: str, **changes) -> _Part:
        return replace(
            self,
            relations=self.relations + (relation,),
            kinds=self.kinds + (kind,),
            on=self.on + (None,),
            **changes,
        )


@dataclass
class Join(Block):
    """The FROM clause as a template: each leaf replaced by a placeholder ``:i``."""

    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "Σi R1_new ⋈ … ⋈ ΔRi ⋈ R(i+1)_old ⋈ …; "
        "outer joins add the NULL-extended rows of the touched join keys at both snapshots"
    )

    from_: exp.Expr
    joins: tuple[exp.Join, ...]
    leaves: list[Leaf]

    def sources(self) -> list[Source]:
        return [s for leaf in self.leaves for s in leaf.sources()]

    @property
    def kinds(self) -> list[str]:
        return [join_kind(j) for j in self.joins]

    def _term(self, part: _Part) -> Term:
        relations = part.relations

        def fill(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Placeholder):
                return relations[int(node.name)].copy()
            return node

        from_ = self.from_.transform(fill)
        joins = []
        steps = zip(self.joins[: len(relations) - 1], part.kinds, part.on, strict=True)
        for join, kind, extra in steps:
            filled = join.transform(fill)
            assert isinstance(filled, exp.Join)
            if kind != join_kind(join):
                _set_kind(filled, kind)
            if extra is not None:
                filled.set("on", exp.and_(filled.args.get("on"), extra.copy()))
                if uses_key_semijoins():  # into the derived table too, as Term.with_filters
                    for condition in conjuncts(extra):
                        push_key_filter(filled.this, condition)
            joins.append(filled)
        return Term(
            from_,
            tuple(joins),
            where=part.where,
            mult=part.mult,
            guards=part.guards,
            delta_alias=part.delta_alias,
            delta_rows=part.delta_rows,
            narrow=part.narrow,
            delta_range=part.delta_range,
        )

    def _state(self, ctx: Context, version: Version, count: int, marked: bool = False) -> _Part:
        """The first ``count`` leaves at ``version`` (with markers if ``marked``)."""
        relations = []
        for leaf in self.leaves[:count]:
            relation = leaf.state(ctx, version)
            relations.append(_marked(relation, leaf.name) if marked else relation)
        return _Part(tuple(relations), tuple(self.kinds[: count - 1]), (None,) * (count - 1))

    def state_terms(self, ctx: Context, version: Version) -> list[Term]:
        part = self._state(ctx, version, len(self.leaves))
        return [self._term(replace(part, guards=state_gates()))]

    def _changed(self, ctx: Context, leaves: list[Leaf]) -> exp.Expr:
        return changed_flag(ctx, leaves)

    def _delta(self, ctx: Context, base: _Part, leaf: Leaf, kind: str | None) -> _Part:
        """``base op ΔR`` for the leaf ``R`` (``kind`` None: R is the first leaf)."""
        relation, mult = leaf.delta(ctx)
        rows = leaf.delta_rows(ctx)
        ranges = leaf.delta_range(ctx)
        return replace(
            base,
            relations=base.relations + (relation,),
            kinds=base.kinds + ((kind,) if kind else ()),
            on=base.on + ((None,) if kind else ()),
            mult=mult,
            guards=(self._changed(ctx, [leaf]),),
            delta_alias=leaf.name if rows is not None or ranges is not None else None,
            delta_rows=rows,
            delta_range=ranges,
            # a subquery's delta for the keys the term can join only (tree.demand)
            narrow=partial(narrow_delta, ctx, leaf) if _narrowable(leaf) else None,
        )

    def _equalities(self, k: int) -> list[tuple[exp.Expr, exp.Expr]]:
        """The ``(a, b)`` of each ON conjunct ``a = b`` of step ``k`` with ``a`` over the
        leaves before ``k`` and ``b`` over leaf ``k``."""
        before = {leaf.name for leaf in self.leaves[:k]}
        mine = {self.leaves[k].name}
        pairs = []
        for conjunct in conjuncts(self.joins[k - 1].args.get("on")):
            if not isinstance(conjunct, exp.EQ):
                continue
            for a, b in (
                (conjunct.this, conjunct.expression),
                (conjunct.expression, conjunct.this),
            ):
                ta, tb = _tables(a), _tables(b)
                if ta is not None and tb is not None and ta <= before and tb == mine:
                    pairs.append((a, b))
        return pairs

    def delta_terms(self, ctx: Context) -> list[Term]:
        return self._terms(ctx, self._delta_parts(ctx))

    def _terms(self, ctx: Context, parts: list[_Part]) -> list[Term]:
        """The terms of the delta's ``parts``; when there are none (no leaf reads a table or
        the clock: constants, or the clock read outside a temporal filter, whose move
        rebuilds), one term of no rows, typed as the join's state."""
        if parts:
            return [self._term(p) for p in parts]
        state = self._state(ctx, Version.NEW, len(self.leaves))
        return [self._term(replace(state, where=(exp.false(),), mult=_constant(0)))]

    def only_grows(self) -> bool:
        """Inner joins only: each term of the ordered rule carries its ΔRi's multiplicity,
        positive when ΔRi is. An outer join's unmatched-row terms subtract a NULL-extended
        row when its first partner arrives.

        >>> from sqlglot import parse_one
        >>> from duckstream.engines.base import Source
        >>> from duckstream.tree.scan import Scan
        >>> def leaf(name):
        ...     return Scan(Source("c", "s", name, 0), exp.TableAlias(this=exp.to_identifier(name)))
        >>> q = parse_one("SELECT * FROM a JOIN b ON a.k = b.k LEFT JOIN c ON b.k = c.k")
        >>> inner = Join(q.args["from_"].this, tuple(q.args["joins"][:1]), [leaf("a"), leaf("b")])
        >>> inner.only_grows(), Join(q.args["from_"].this, tuple(q.args["joins"]),
        ...     [leaf("a"), leaf("b"), leaf("c")]).only_grows()
        (True, False)
        """
        inner = all(join_kind(j) == INNER and j.find(exp.Query) is None for j in self.joins)
        return inner and all(leaf.only_grows() for leaf in self.leaves)

    def reads_changes_only(self, ctx: Context) -> bool:
        # one leaf: a source's changes, or a derived table projecting and filtering them (a
        # staging model or a CTE ``SELECT cols FROM t WHERE p`` inlined into the view)
        return len(self.leaves) == 1 and self.leaves[0].reads_changes_only(ctx)

    def changed_rows(self, ctx: Context) -> tuple[str, exp.Expr] | None:
        if len(self.leaves) != 1:
            return None
        rows = self.leaves[0].delta_rows(ctx)
        return None if rows is None else (self.leaves[0].name, rows)

    def key_terms(self, ctx: Context, aliases: frozenset[str] | None) -> list[Term]:
        """The delta terms, but for the unmatched-row terms of a last LEFT (or FULL) step
        when the keys read only the relations before it: a row ``j`` of J flips between
        matched and NULL-extended only when a partner among ΔR's rows comes or goes, and then
        ``J_new ⋈ ΔR`` (``⟖`` for FULL) holds ``j`` with such a partner, the same keys. Those
        terms read R at two snapshots for the changed keys, a scan of R each."""
        last = len(self.leaves) - 1
        before = {leaf.name for leaf in self.leaves[:last]}
        if last < 1 or self.kinds[-1] not in (LEFT, FULL) or aliases is None:
            return self.delta_terms(ctx)
        if not aliases <= before:
            return self.delta_terms(ctx)
        return self._terms(ctx, self._delta_parts(ctx, covered_left=last))

    def _delta_parts(self, ctx: Context, covered_left: int | None = None) -> list[_Part]:
        """The delta's parts; ``covered_left``: the step whose unmatched-left terms to leave
        out (see :meth:`key_terms`)."""
        # A leaf that reads neither a table nor the clock (a constant relation) never
        # changes: the terms of its delta, and those of rows it would match or unmatch, are
        # empty and left out.
        first = self.leaves[0]
        parts = [self._delta(ctx, _Part((), ()), first, None)] if changes(first) else []
        for k in range(1, len(self.leaves)):
            op, leaf = self.kinds[k - 1], self.leaves[k]
            new_j = self._state(ctx, Version.NEW, k)
            extended = [
                p.extend(leaf.state(ctx, Version.OLD), LEFT if op in (LEFT, FULL) else INNER)
                for p in parts
            ]
            if isinstance(leaf, LateralSubquery):
                if changes(leaf):  # one that reads no table never changes
                    extended += self._reevaluated(ctx, leaf, new_j, op)
            elif changes(leaf):
                kind = RIGHT if op in (RIGHT, FULL) else INNER
                extended.append(self._delta(ctx, new_j, leaf, kind))
                if op in (LEFT, FULL) and k != covered_left:
                    extended += self._unmatched_left(ctx, k, new_j)
            if op in (RIGHT, FULL) and parts:
                extended += self._unmatched_right(ctx, k, parts)
            parts = extended
        return parts

    def _reevaluated(
        self, ctx: Context, leaf: LateralSubquery, new_j: _Part, op: str
    ) -> list[_Part]:
        """``J_new[affected] op Q(U_new) - J_new[affected] op Q(U_old)`` for a lateral
        subquery ``Q`` (``tree.lateral_subquery``), ``op`` its join (inner or LEFT)."""
        affected = leaf.affected(ctx)
        where, keys = (affected[0],) if affected else (), affected[1] if affected else None
        if affected and uses_key_semijoins():
            # into the outer relation's state too: DuckDB 1.5.5 otherwise evaluates the
            # subquery for every row of J before the WHERE drops the unaffected ones
            relations = tuple(r.copy() for r in new_j.relations)
            for relation in relations:
                push_key_filter(relation, affected[0])
            new_j = replace(new_j, relations=relations)
        return [
            new_j.extend(
                leaf.state(ctx, version, keys),
                op,
                where=where,
                mult=_constant(sign),
                guards=(self._changed(ctx, [leaf]),),
            )
            for version, sign in ((Version.NEW, 1), (Version.OLD, -1))
        ]

    def _unmatched_left(self, ctx: Context, k: int, new_j: _Part) -> list[_Part]:
        """``L(J_new, R_new) - L(J_new, R_old)`` for the rows of J_new with a partner key
        among ΔR's rows."""
        leaf = self.leaves[k]
        pairs = self._equalities(k)
        keys = [exp.select(b.copy()).from_(self._changed_rows(ctx, leaf, b)) for _, b in pairs]
        bounded = self._bounded(ctx, leaf, pairs, new_j)
        parts = []
        for version, sign in ((Version.NEW, 1), (Version.OLD, -1)):
            where = tuple(_in(ctx, a, q) for (a, _), q in zip(pairs, keys, strict=True))
            where += tuple(c.copy() for c in bounded)
            # The same keys prune R's scan: for J's rows kept, a partner's b equals their a.
            on = [_in(ctx, b, q) for (_, b), q in zip(pairs, keys, strict=True)]
            part = new_j.extend(
                _marked(leaf.state(ctx, version), leaf.name),
                LEFT,
                where=where + (_absent(leaf.name),),
                mult=_constant(sign),
                guards=(self._changed(ctx, [leaf]),),
            )
            parts.append(self._pruned(ctx, part, on))
        return parts

    def _bounded(
        self, ctx: Context, leaf: Leaf, pairs: list[tuple[exp.Expr, exp.Expr]], new_j: _Part
    ) -> list[exp.Expr]:
        """For each ``a = b`` with ``b`` a column of the changed ``leaf`` and ``a`` a column
        of a source's state in J: ``a`` within the range of ``b`` in the leaf's changes
        (:meth:`Term.range_filters`), where the engine gives ranges. Implied by the
        unmatched-row terms' ``a IN (SELECT b FROM ΔR)``, which Spark cannot push into J's
        scans: the range it can (and infers R's from it through the ON)."""
        ranges = leaf.delta_range(ctx)
        if ranges is None:
            return []
        relations = {x.name: r for x, r in zip(self.leaves, new_j.relations, strict=False)}
        found = []
        for a, b in pairs:
            if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
                continue
            key_range = ranges(b.name)
            condition = key_range.on(a, relations.get(a.table)) if key_range else None
            if condition is not None:
                found.append(condition)
        return found

    @staticmethod
    def _changed_rows(ctx: Context, leaf: Leaf, key: exp.Expr) -> exp.Expr:
        """The leaf's changes, for reading ``key`` (over the leaf) from them: its cheap rows
        (:meth:`Leaf.delta_rows`, perhaps key columns only) when they have the columns,
        else its delta (a derived table's delta: the subquery's whole delta again)."""
        rows = leaf.delta_rows(ctx)
        if rows is not None:
            has = row_columns(rows)
            if has is None or {c.name for c in key.find_all(exp.Column)} <= has:
                return aliased(rows.copy(), leaf.name)
        return leaf.delta(ctx)[0]

    def _unmatched_right(self, ctx: Context, k: int, delta_j: list[_Part]) -> list[_Part]:
        """``R(J_new, R_old) - R(J_old, R_old)`` for the rows of R_old with a partner key
        among ΔJ's rows."""
        pairs = self._equalities(k)
        terms = [self._term(p) for p in delta_j] if pairs else []
        keys = [
            exp.select("_ivm_key").from_(
                exp.paren(union_all([t.select(exp.alias_(a, "_ivm_key")) for t in terms])).as_(
                    "_ivm_dj"
                )
            )
            for a, _ in pairs
        ]
        absent = exp.and_(*(_absent(x.name) for x in self.leaves[:k]))
        parts = []
        for version, sign in ((Version.NEW, 1), (Version.OLD, -1)):
            where = tuple(_in(ctx, b, q) for (_, b), q in zip(pairs, keys, strict=True))
            on = [_in(ctx, a, q) for (a, _), q in zip(pairs, keys, strict=True)]
            part = self._state(ctx, version, k, marked=True).extend(
                self.leaves[k].state(ctx, Version.OLD),
                RIGHT,
                where=where + (absent,),
                mult=_constant(sign),
                guards=(self._changed(ctx, self.leaves[:k]),),
            )
            parts.append(self._pruned(ctx, part, on))
        return parts

    @staticmethod
    def _pruned(ctx: Context, part: _Part, conditions: list[exp.Expr]) -> _Part:
        """``part`` with ``conditions`` (over the null-supplying side of its last join) added
        to that join's ON, when the engine re-reads its changes cheaply
        (``changes_are_materialized``): implied for the rows the term keeps, it prunes the
        scan of that side to the changed keys; elsewhere the WHERE filter alone is exact and
        the changes are read once less."""
        if not conditions or not ctx.engine.changes_are_materialized:
            return part
        return replace(part, on=part.on[:-1] + (exp.and_(*conditions),))


def _narrowable(leaf: Leaf) -> bool:
    """Whether ``leaf`` may compute its delta for some keys only (``tree.demand``); only on
    engines that take key semi-joins (:func:`uses_key_semijoins`), as the other key filters."""
    return uses_key_semijoins() and type(leaf).delta_within is not Leaf.delta_within


def _in(ctx: Context, expression: exp.Expr, query: exp.Select) -> exp.Expr:
    """``expression IN (query)``, the query's CTEs renamed: a derived table's delta used
    twice in one statement must not define a CTE name twice (a dialect may hoist nested
    WITHs to the statement's top)."""
    query = query.copy()
    renamed = {}
    for cte in query.find_all(exp.CTE):
        ctx.counter += 1
        renamed[cte.alias] = f"{cte.alias}_{ctx.counter}"
        cte.set("alias", exp.TableAlias(this=exp.to_identifier(renamed[cte.alias])))
    for table in query.find_all(exp.Table):
        if not table.db and table.name in renamed:
            table.set("this", exp.to_identifier(renamed[table.name]))
    return key_in(expression, query)


def _constant(sign: int) -> exp.Expr:
    return exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))
