"""Constant relations: a ``VALUES`` list, a series with constant arguments (``range``,
``generate_series``), and any query that reads no table (``SELECT 0 AS n UNION ALL SELECT 1``,
as ``dbt_utils.generate_series`` writes it; joins, windows and aggregates over those).

Delta rule: ``ΔC = ∅`` -- a constant relation is the same at every snapshot, ``C_old = C_new =
C``: its full value is its rows, read as written (it reads no table, so no time travel), and
its delta has no rows. Operators above it then need no rule of their own: a join skips the
terms that would read ``ΔC`` (``Δ(R ⋈ C) = ΔR ⋈ C``), a union stacks ``ΔR`` with nothing.

Example: ``SELECT k FROM t UNION ALL SELECT 0 AS k`` over t = {1}: the view is {1, 0}; insert
2 into t, and the delta is ``Δt ⊎ ∅`` = {2: +1}, the view {1, 0, 2}.

>>> from sqlglot import parse_one
>>> c = ConstantRelation(parse_one("SELECT 0 AS n UNION ALL SELECT 1 AS n"))
>>> c.columns(), c.sources()
(['n'], [])
>>> c.delta(None).sql()
'SELECT *, CAST(0 AS BIGINT) AS _ivm_mult FROM (SELECT 0 AS n UNION ALL SELECT 1 AS n) AS _ivm_c WHERE FALSE'
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from duckstream.clock import clock_kinds
from duckstream.engines.base import MULT, Source, Version
from duckstream.expressions import aliased, varies
from duckstream.tree.base import Context, Leaf, Relation


def reads_no_table(query: exp.Expr) -> bool:
    """Whether ``query`` (normalized: its CTEs inlined) reads no table, nor anything else
    that changes (the clock: a spine up to ``current_date`` is not a constant).

    >>> from sqlglot import parse_one
    >>> [reads_no_table(parse_one(q)) for q in ("SELECT 1", "SELECT * FROM range(3) AS r(i)",
    ...     "SELECT 1 FROM (SELECT * FROM t) AS s", "SELECT current_date AS d")]
    [True, True, False, False]
    """
    tables = any(isinstance(t.this, exp.Identifier) for t in query.find_all(exp.Table))
    # the clock as normalize.pin_clock marks it varies too (a filter on it over a constant
    # relation is not a constant); the marked series itself is a constant relation of the
    # refresh's pinned clock (normalize.constant_relations), so varies() leaves it out
    return not tables and not varies(query) and not clock_kinds(query)


def _no_rows(relation: exp.Expr) -> exp.Select:
    """``SELECT *, 0 AS _ivm_mult FROM relation WHERE FALSE``: the relation's columns (typed
    as the relation types them) and a multiplicity, no rows."""
    multiplicity = exp.cast(exp.Literal.number(0), exp.DataType.build("bigint"))
    return exp.select(exp.Star(), exp.alias_(multiplicity, MULT)).from_(relation).where(exp.false())


@dataclass
class ConstantRelation(Relation):
    """A query that reads no table, used inside the view (a derived table, a set operation's
    branch)."""

    query: exp.Query
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "∅: the same rows at every snapshot"

    def sources(self) -> list[Source]:
        return []

    def columns(self) -> list[str]:
        return list(self.query.named_selects)

    def state(self, ctx: Context, version: Version) -> exp.Query:
        return self.query.copy()

    def delta(self, ctx: Context) -> exp.Query:
        # kept (not left out of a union) so that the delta is typed as the state is
        return _no_rows(aliased(self.query.copy(), "_ivm_c"))


@dataclass
class ConstantLeaf(Leaf):
    """A ``VALUES`` list or a series in FROM, under its alias (``normalize.constant_relations``
    named its columns)."""

    relation: exp.Expr  # the aliased VALUES or series
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = "∅: the same rows at every snapshot"

    @property
    def name(self) -> str:
        return self.relation.alias_or_name

    def sources(self) -> list[Source]:
        return []

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        return self.relation.copy()

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        rows = aliased(_no_rows(self.relation.copy()), self.name)
        return rows, exp.column(MULT, table=self.name)
