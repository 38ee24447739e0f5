"""Window functions inside a view: ``SELECT ..., f(...) OVER (PARTITION BY p ...) FROM R``.

A window function's value on a row depends on every row of its partition, and on nothing
else. So over the partitions P that the input's delta touches (a row that moved partition
touches both its old and its new one):

    Δ(ω_P(R)) = ω_P(R_new ⋉ affected)  -  ω_P(R_old ⋉ affected)

the touched partitions recomputed at the end snapshot (+1) and at the cursor (-1), the same
state diff as an inner aggregate's (:func:`~duckstream.tree.aggregate.regroup_delta`). With
several windows, P is what every one of them partitions by; a window without PARTITION BY
makes the whole input one partition, recomputed whenever it changes.

``normalize.isolate_windows`` gives the SELECT a derived table of its own as input, so its
state is one term whose rows restrict to partitions.

Example: ``SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS n FROM r`` and an
insert of ``(2, 5)``: only partition ``k = 2`` is read, numbered before and after, and the
rows whose number changed leave and enter the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.aggregate import regroup_delta
from duckstream.tree.base import Block, Context, Relation, Term, union_all
from duckstream.tree.key_filters import states_unfiltered


def partition_keys(items: list[exp.Expr]) -> list[exp.Expr]:
    """The expressions every window of ``items`` partitions by (in the first one's order).

    >>> from sqlglot import parse_one
    >>> items = [parse_one("rank() OVER (PARTITION BY a, b ORDER BY c)"),
    ...          parse_one("sum(x) OVER (PARTITION BY b, a)")]
    >>> [k.sql() for k in partition_keys(items)]
    ['a', 'b']
    >>> partition_keys([*items, parse_one("row_number() OVER (ORDER BY c)")])
    []
    """
    windows = [w for item in items for w in item.find_all(exp.Window)]
    lists = [w.args.get("partition_by") or [] for w in windows]
    if not lists:
        return []
    common = [p for p in lists[0] if all(any(p == q for q in other) for other in lists[1:])]
    unique: list[exp.Expr] = []
    for p in common:
        if not any(p == u for u in unique):
            unique.append(p)
    return [p.copy() for p in unique]


@dataclass
class Window(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "ω(R_new ⋉ touched) − ω(R_old ⋉ touched): "
        "the partitions the delta touches recomputed at both snapshots"
    )
    input: Block
    items: list[exp.Expr]
    names: list[str]

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def _close(self, term: Term) -> exp.Select:
        return term.select(*self.items)

    def state(self, ctx: Context, version: Version) -> exp.Query:
        with states_unfiltered():
            terms = self.input.state_terms(ctx, version)
            assert len(terms) == 1, "isolate_windows gives a window one derived table"
            return union_all([self._close(t) for t in terms])

    def delta(self, ctx: Context) -> exp.Query:
        with states_unfiltered():
            return regroup_delta(ctx, self.input, partition_keys(self.items), self._close)
