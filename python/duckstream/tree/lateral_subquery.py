"""Lateral subquery: ``LATERAL (SELECT ... FROM u WHERE u.k = t.k ...) AS s`` after the
relations ``J`` it reads (a CROSS JOIN, or a LEFT JOIN ... ON TRUE), evaluated per row of
``J`` (``Q(j, U)``: the subquery over the tables ``U`` it reads, for the row ``j``).

Delta rule: the subquery is re-evaluated for the rows whose result may have changed:

    Δ(J ⋈_lat Q(J, U)) = ΔJ ⋈_lat Q(ΔJ, U_old)
                        + J_new[affected] ⋈_lat Q(J, U_new) - J_new[affected] ⋈_lat Q(J, U_old)

``L_new - L_old = (J_new - J_old) ⋈ Q(U_old) + J_new ⋈ (Q(U_new) - Q(U_old))``: the first
term is the lateral apply of the changed rows (as for a table function,
``tree.lateral_function``), the second the rows of ``J`` as they are now, their subquery at
the two snapshots. Both are exact for a LEFT join too (a row whose subquery has no rows gives
one NULL-extended row at that snapshot). ``affected``: when the subquery reads one table and
its WHERE has a conjunct ``u.c = e(J)`` (``e`` over the outer relations only), a row ``j``
can see a change only if some changed row of ``u`` (old or new version) has ``u.c =
e(j)``: every other row passes the same rows of ``u`` to the rest of the subquery (grouping,
ORDER BY, LIMIT) at both snapshots. The term then reads ``e(J) IN (SELECT u.c FROM Δu)``;
a NULL ``e(j)`` matches no row of ``u`` at either snapshot. Otherwise every row of ``J_new``
is re-evaluated (exact, and as costly as a recomputation of the join).

A subquery that chooses rows (ORDER BY ... LIMIT) must choose the same ones at every
evaluation: ``normalize.lateral_subqueries`` breaks its ties by the output columns.

Example: ``SELECT t.k, s.x FROM t, LATERAL (SELECT u.x FROM u WHERE u.k = t.k ORDER BY u.x
LIMIT 1) AS s`` over t = {1}, u = {(1, 5)} holds (1, 5). Insert (1, 3) into u: the affected
rows of t are those with k = 1; Q_new gives (1, 3) at +1, Q_old (1, 5) at -1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sqlglot import exp

from duckstream.engines.base import Source, Version
from duckstream.tree.base import Context, Leaf, conjuncts
from duckstream.tree.key_filters import key_in
from duckstream.tree.scan import Scan


@dataclass
class LateralSubquery(Leaf):
    """``LATERAL (SELECT ...) AS alias`` in FROM; ``tables`` the sources of its tables, in
    the order the subquery names them."""

    lateral: exp.Lateral
    tables: list[Source]
    outer: frozenset[str] = field(default_factory=frozenset)  # the aliases before it
    # its delta rule in a line (``python -m duckstream explain``)
    rule: ClassVar[str] = (
        "ΔJ ⋈lat Q(U_old) + J_new[affected] ⋈lat (Q(U_new) - Q(U_old)): "
        "the subquery re-evaluated for the rows whose correlation keys changed"
    )

    @property
    def name(self) -> str:
        return self.lateral.alias_or_name

    def sources(self) -> list[Source]:
        return list(self.tables)

    def _source_tables(self, query: exp.Expr) -> list[exp.Table]:
        return [t for t in query.find_all(exp.Table) if isinstance(t.this, exp.Identifier)]

    def state(self, ctx: Context, version: Version, keys: exp.Expr | None = None) -> exp.Expr:
        """The subquery over its tables at ``version``; ``keys``: a condition added to its
        WHERE (:meth:`affected`'s inner one, implied for the rows the term keeps)."""
        lateral = self.lateral.copy()
        for table, source in zip(self._source_tables(lateral), self.tables, strict=True):
            alias = exp.TableAlias(this=exp.to_identifier(table.alias_or_name))
            table.replace(Scan(source, alias).state(ctx, version))
        if keys is not None:
            query = lateral.this.this
            assert isinstance(query, exp.Select)
            query.where(keys.copy(), copy=False)
        return lateral

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        raise AssertionError("a lateral subquery is re-evaluated (Join), it has no delta")

    def affected(self, ctx: Context) -> tuple[exp.Expr, exp.Expr] | None:
        """The condition on the outer rows whose subquery may have changed (``None``: every
        row), as in the module's docstring, and the same keys as a condition on the
        subquery's table (``u.c IN (SELECT u.c FROM Δu)``): implied by ``u.c = e(j)`` for the
        rows kept, it lets the engine aggregate or sort only the changed keys' rows of ``u``
        rather than all of them (DuckDB 1.5.5 evaluated the subquery for every key first)."""
        query = self.lateral.this.this
        tables = self._source_tables(query)
        if len(tables) != 1 or query.args.get("joins") or len(self.tables) != 1:
            return None
        source = query.args.get("from_")
        if source is None or source.this is not tables[0]:
            return None
        inner = tables[0].alias_or_name
        where = query.args.get("where")
        for conjunct in conjuncts(where.this if where else None):
            if not isinstance(conjunct, exp.EQ):
                continue
            for mine, other in (
                (conjunct.this, conjunct.expression),
                (conjunct.expression, conjunct.this),
            ):
                columns = list(other.find_all(exp.Column))
                if not (isinstance(mine, exp.Column) and mine.table == inner):
                    continue
                if not columns or any(c.table not in self.outer for c in columns):
                    continue
                if other.find(exp.Query, exp.AggFunc, exp.Window) is not None:
                    continue
                alias = exp.TableAlias(this=exp.to_identifier(inner))
                changes = Scan(self.tables[0], alias).delta(ctx)[0]
                keys = exp.select(mine.copy()).from_(changes)
                return key_in(other, keys), key_in(mine, keys.copy())
        return None
