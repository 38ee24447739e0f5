"""Lateral table function: ``unnest(t.tags)``, ``range(t.a, t.b)`` or ``generate_series(...)``
over the columns of the relations before it in FROM (``normalize.lateral_functions`` spelled
it ``CROSS JOIN LATERAL f(...) AS u(cols)`` or ``LEFT JOIN LATERAL ... ON TRUE``).

Delta rule: ``Δ(J ⋈_lat f(J)) = ΔJ ⋈_lat f(ΔJ)`` -- a lateral apply of a function that reads
no table is linear in its input: each row of ``J`` yields the same 0..n rows whenever it is
there, so a changed row yields its rows with its own signed multiplicity, like a filter or a
projection that produces several rows. The function itself never changes (``f_old = f_new =
f``): the leaf has no sources, so the join's ordered rule (``tree.join``) has no term of its
own for it, and every term that changes a relation before it applies the function to the
changed rows as written. A LEFT join is linear in its preserved side just the same: a row
whose list is empty or NULL gives one NULL-extended row, inserted or deleted with the row.

Example: ``SELECT t.k, u.tag FROM t, unnest(t.tags) AS u(tag)`` with t = {(1, [a, a, b])}
holds (1, a) twice and (1, b). Update the row to (1, [b]): Δt = {(1, [a, a, b]): -1, (1,
[b]): +1}, and ``Δt ⋈_lat unnest(Δt.tags)`` = {(1, a): -2, (1, b): -1 + 1}: the view {(1, b)}.

>>> from sqlglot import parse_one
>>> from duckstream.normalize.lateral_functions import lateral_functions
>>> view = lateral_functions(parse_one("SELECT * FROM t, unnest(t.tags) AS u(tag)"), "duckdb")
>>> leaf = LateralFunction(view.args["joins"][0].this)
>>> leaf.name, leaf.sources(), leaf.state(None, None).sql("duckdb")
('u', [], 'LATERAL UNNEST(t.tags) AS u(tag)')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.base import Context, Leaf


@dataclass
class LateralFunction(Leaf):
    """``LATERAL f(...) AS alias(cols)`` in FROM, ``f`` a table function over the row's
    columns."""

    lateral: exp.Lateral
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "ΔJ ⋈lat f(ΔJ): the function applied to the changed rows only"

    @property
    def name(self) -> str:
        return self.lateral.alias_or_name

    def sources(self) -> list[Source]:
        return []  # it reads the row it stands beside, no table

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        # the same at every snapshot: the rows it reads are the term's
        return self.lateral.copy()

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        raise AssertionError("a lateral function never changes: the join reads no delta of it")

    def only_grows(self) -> bool:
        return True  # no delta of its own: its rows come and go with the rows it reads
