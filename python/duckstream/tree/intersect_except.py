"""INTERSECT and EXCEPT, with ALL or distinct: how many copies of each row they keep.

With ``a`` and ``b`` the copies of a row in A and in B (rows compare as set operations
compare them: NULL equals NULL), the result holds ``f(a, b)`` copies:

    A INTERSECT ALL B   min(a, b)
    A EXCEPT ALL B      max(a − b, 0)
    A INTERSECT B       1 if a > 0 and b > 0, else 0
    A EXCEPT B          1 if a > 0 and b = 0, else 0

None of these is linear, so the delta recounts only the rows the branches' deltas touch,
read at the end snapshot and at the cursor:

    Δ(A op B)(r) = f(a_new(r), b_new(r)) − f(a_old(r), b_old(r))   for r in ΔA ∪ ΔB

(a row whose net change is zero in both branches keeps its counts and is not recounted).
Example, INTERSECT ALL: A = {1, 1, 2}, B = {1} gives {1}. Insert 1 into B and delete 2 from A
in one window: the touched rows are 1 and 2; for 1, min(2, 2) − min(2, 1) = +1; for 2,
min(0, 0) − min(1, 0) = 0. So Δ = {1: +1}: the result becomes {1, 1}.

The counts come from both branches stacked with the engine's UNION ALL, which casts them to
one type per column as the engine's own INTERSECT / EXCEPT does (INTEGER 1 meets BIGINT 1),
and are grouped by every column (GROUP BY puts NULLs in one group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp, parse_one

from duckstream.engines.base import MULT, Source, Version
from duckstream.expressions import aliased
from duckstream.tree.aggregate import null_safe_match
from duckstream.tree.base import Context, Relation, changed_flag, col, union_all
from duckstream.tree.union import stack

LEFT, RIGHT = "_ivm_l", "_ivm_r"  # a row's copies in the first and in the second branch

# (operation, ALL?) -> the copies of a row the result keeps, from LEFT and RIGHT
KEPT = {
    ("intersect", True): "CASE WHEN _ivm_l < _ivm_r THEN _ivm_l ELSE _ivm_r END",
    ("except", True): "CASE WHEN _ivm_l > _ivm_r THEN _ivm_l - _ivm_r ELSE 0 END",
    ("intersect", False): "CASE WHEN _ivm_l > 0 AND _ivm_r > 0 THEN 1 ELSE 0 END",
    ("except", False): "CASE WHEN _ivm_l > 0 AND _ivm_r = 0 THEN 1 ELSE 0 END",
}


def _number(value: int) -> exp.Expr:
    return exp.cast(exp.Literal.number(value), exp.DataType.build("bigint"))


@dataclass
class IntersectExcept(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "f(a_new, b_new) − f(a_old, b_old) for the rows either branch's delta touches"
    )
    operation: str  # "intersect" or "except"
    all: bool
    left: Relation
    right: Relation

    def sources(self) -> list[Source]:
        return self.left.sources() + self.right.sources()

    def columns(self) -> list[str]:
        return self.left.columns()

    def _native(self, left: exp.Query, right: exp.Query) -> exp.Query:
        kind = exp.Intersect if self.operation == "intersect" else exp.Except
        return kind(
            this=exp.select("*").from_(aliased(left, "_ivm_s0")),
            expression=exp.select("*").from_(aliased(right, "_ivm_s1")),
            distinct=not self.all,
        )

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return self._native(self.left.state(ctx, version), self.right.state(ctx, version))

    def kept(self) -> exp.Expr:
        """The copies of a row the result keeps, from its copies in each branch."""
        return parse_one(KEPT[(self.operation, self.all)])

    def _touched(self, ctx: Context) -> exp.Select:
        """The distinct rows whose count changed in either branch."""
        names = [col(n) for n in self.columns()]
        side = "_ivm_side"
        deltas = stack(
            [self.left.delta(ctx), self.right.delta(ctx)],
            [[exp.alias_(exp.Literal.number(i), side)] for i in (0, 1)],
        )
        net = (
            exp.select(*names)
            .from_(aliased(deltas, "_ivm_d"))
            .group_by(*names, col(side))
            .having(exp.NEQ(this=exp.Sum(this=col(MULT)), expression=exp.Literal.number(0)))
        )
        return exp.select(*names).distinct().from_(aliased(net, "_ivm_n"))

    def _recounted(self, ctx: Context, version: Version, touched: str, sign: int) -> exp.Select:
        """The touched rows with ``sign`` times the copies the result keeps at ``version``."""
        names = self.columns()
        tags = [[exp.alias_(_number(1 - i), LEFT), exp.alias_(_number(i), RIGHT)] for i in (0, 1)]
        rows = stack([self.left.state(ctx, version), self.right.state(ctx, version)], tags)
        exists = exp.Exists(
            this=exp.select("1")
            .from_(exp.to_table(touched).as_("_ivm_a"))
            .where(
                null_safe_match(
                    [col(n, "_ivm_a") for n in names], [col(n, "_ivm_t") for n in names]
                )
            )
        )
        guard = changed_flag(ctx, [self])
        counts = (
            exp.select(
                *(col(n) for n in names),
                exp.alias_(exp.Sum(this=col(LEFT)), LEFT),
                exp.alias_(exp.Sum(this=col(RIGHT)), RIGHT),
            )
            .from_(aliased(rows, "_ivm_t"))
            .where(exp.and_(guard, exists))
            .group_by(*(col(n) for n in names))
        )
        kept = self.kept()
        signed = kept.copy() if sign > 0 else exp.Neg(this=exp.paren(kept.copy()))
        mult = exp.cast(signed, exp.DataType.build("bigint"))
        return (
            exp.select(*(col(n) for n in names), exp.alias_(mult, MULT))
            .from_(aliased(counts, "_ivm_c"))
            .where(exp.GT(this=kept, expression=exp.Literal.number(0)))
        )

    def delta(self, ctx: Context) -> exp.Query:
        ctx.counter += 1
        touched = f"_ivm_touched_{ctx.counter}"
        query = union_all(
            [
                self._recounted(ctx, Version.NEW, touched, 1),
                self._recounted(ctx, Version.OLD, touched, -1),
            ]
        )
        return query.with_(touched, as_=self._touched(ctx))  # type: ignore[attr-defined]
