"""Project: the select list of a SELECT block without aggregates or DISTINCT.

Delta rule: ``Δ(π_L(R)) = π_L(ΔR)`` -- each delta row is projected and keeps its signed
multiplicity; expressions (CASE, arithmetic, casts, string functions) are evaluated on the
delta rows exactly as on the state. Duplicates the projection creates are kept as
multiplicities and netted by whoever applies the delta.

Over one source's changes (a staging model or a CTE ``SELECT cols FROM t WHERE p``, inlined
into the view, :meth:`Block.reads_changes_only`) ``π_L(σ_p(ΔT))`` is itself a scan of the
materialized change copy: cheap to read again, so it is also the projection's changed keys
(:meth:`Project.delta_keys`). A join of a derived table over it then filters its other
relations by those keys, and a grouped subquery over it knows its affected groups from them,
as they do for a table read directly:

    customers ⟕ (SELECT k, count(*) FROM (SELECT k FROM orders WHERE s <> 'x') o GROUP BY k) a
        ON a.k = customers.k

reads ``a``'s changed groups from ``orders``' change copy, not from ``a``'s whole delta (which
regroups those groups at two snapshots) in every term that needs only its keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import MULT, Source, Version
from duckstream.tree.base import Block, Context, Relation, union_all


@dataclass
class Project(Relation):
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "π(ΔR): each delta row projected, its multiplicity kept"
    input: Block
    items: list[exp.Expr]  # aliased select items
    names: list[str]

    def sources(self) -> list[Source]:
        return self.input.sources()

    def columns(self) -> list[str]:
        return list(self.names)

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return union_all([t.select(*self.items) for t in self.input.state_terms(ctx, version)])

    def delta(self, ctx: Context) -> exp.Query:
        return union_all(
            [
                t.select(*self.items, exp.alias_(t.multiplicity(), MULT))
                for t in self.input.delta_terms(ctx)
            ]
        )

    def only_grows(self) -> bool:
        return self.input.only_grows()  # each delta row keeps its multiplicity

    def reads_changes_only(self, ctx: Context) -> bool:
        return self.input.reads_changes_only(ctx)

    def delta_keys(self, ctx: Context) -> exp.Query | None:
        """The delta itself when it reads one source's changes only (see the module), every
        column of it then a changed key; else ``None``.

        >>> from duckstream.engines.base import Source, Target
        >>> from duckstream.engines.ducklake.engine import DuckLakeEngine
        >>> from duckstream.tree.filter import Filter
        >>> from duckstream.tree.join import Join
        >>> from duckstream.tree.scan import Scan
        >>> engine = DuckLakeEngine()
        >>> engine.bind(Target("c", "s", "v", "_ivm_cursors"), [])
        >>> scan = Scan(Source("c", "s", "t", 0), exp.TableAlias(this=exp.to_identifier("t")))
        >>> block = Filter(Join(exp.Placeholder(this="0"), (), [scan]), exp.column("s", "t").neq(1))
        >>> project = Project(block, [exp.column("k", "t").as_("k")], ["k"])
        >>> print(project.delta_keys(Context(engine)).sql())  # doctest: +ELLIPSIS
        SELECT t.k AS k, t._ivm_mult AS _ivm_mult FROM (SELECT * FROM temp..._changes_0) AS t ...
        >>> wide = Join(exp.Placeholder(this="0"), (exp.Join(this=exp.Placeholder(this="1")),),
        ...     [scan, scan])  # two tables: their delta terms read each other's states
        >>> Project(wide, [exp.column("k", "t").as_("k")], ["k"]).delta_keys(Context(engine))
        """
        return self.delta(ctx) if self.input.reads_changes_only(ctx) else None
