"""UNION ALL: the branches' rows stacked (``UNION`` is DISTINCT over it, see
``normalize.rewrite_union``).

Delta rule: bag union is linear, so

    Δ(A ⊎ B) = ΔA ⊎ ΔB

each branch's delta (its columns, then ``_ivm_mult``) stacked by position. Example: A = {1},
B = {1, 2}; delete 1 from A and insert 3 into B in one window: ΔA = {1: −1}, ΔB = {3: +1},
so Δ(A ⊎ B) = {1: −1, 3: +1}, and A ⊎ B goes from {1, 1, 2} to {1, 2, 3}.

Columns are named by the first branch and typed by the engine's own UNION ALL: the state and
the delta are both stacked with it, so they get the types the view itself has (INTEGER ∪
BIGINT is BIGINT on DuckDB and Spark; DECIMAL ∪ DOUBLE is DOUBLE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.expressions import aliased
from duckstream.tree.base import Context, Relation


def stack(queries: Sequence[exp.Query], tags: Sequence[Sequence[exp.Expr]] = ()) -> exp.Query:
    """``SELECT * FROM (q0) AS _ivm_s0 UNION ALL SELECT * FROM (q1) AS _ivm_s1 ...``: each
    query in a subquery of its own, so that a branch's own set operations, WITH or ORDER
    never bind to its neighbours; ``tags[i]`` are extra (aliased) items after query i's
    columns.

    >>> from sqlglot import parse_one
    >>> stack([parse_one("SELECT 1 AS a INTERSECT SELECT 2"), parse_one("SELECT 3")]).sql()
    'SELECT * FROM (SELECT 1 AS a INTERSECT SELECT 2) AS _ivm_s0 UNION ALL SELECT * FROM (SELECT 3) AS _ivm_s1'
    """  # noqa: E501
    selects = []
    for i, query in enumerate(queries):
        extra = [t.copy() for t in tags[i]] if tags else []
        selects.append(exp.select("*", *extra).from_(aliased(query, f"_ivm_s{i}")))
    if len(selects) == 1:
        return selects[0]
    # one n-ary call: the selects are this function's own, so nothing is copied (a union
    # built pairwise copies the growing left side at each step, quadratic in the branches)
    return exp.union(*selects, distinct=False, copy=False)


@dataclass
class UnionAll(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "ΔA ⊎ ΔB: the branches' deltas stacked"
    inputs: list[Relation]

    def sources(self) -> list[Source]:
        return [s for i in self.inputs for s in i.sources()]

    def columns(self) -> list[str]:
        return self.inputs[0].columns()

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return stack([i.state(ctx, version) for i in self.inputs])

    def delta(self, ctx: Context) -> exp.Query:
        return stack([i.delta(ctx) for i in self.inputs])

    def only_grows(self) -> bool:
        return all(i.only_grows() for i in self.inputs)
