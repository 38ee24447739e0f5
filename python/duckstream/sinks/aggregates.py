"""How each aggregate function is kept up to date from a delta.

Every aggregate of a grouped view becomes hidden columns of the materialized table plus four
expressions: its contribution from delta rows (signed multiplicity ``m``), its value over
plain rows (initial fill and group rescans), how old state and delta merge, and the visible
value. Aggregates that cannot merge (a deleted MIN, COUNT(DISTINCT), MEDIAN, ...) ask for
the group to be rescanned from the sources instead.

=========  ===============================  ==========================================
function   hidden state                     on delete
=========  ===============================  ==========================================
COUNT(*)   the group's row count            subtract
COUNT(x)   count of non-NULL x              subtract
SUM(x)     sum, count of non-NULL x         subtract (NULL when no non-NULL x is left)
AVG(x)     sum, count of non-NULL x         subtract; value = sum / count
MIN/MAX    current extreme                  rescan the group if the extreme may be gone
other      the value                        rescan the group
=========  ===============================  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from duckstream.engines.base import Engine

ALGEBRAIC = {exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max}


def _bigint(e: exp.Expr) -> exp.Expr:
    return exp.cast(e, exp.DataType.build("bigint"))


def _nonnull_mult(x: exp.Expr, m: exp.Expr) -> exp.Expr:
    case = exp.Case(
        ifs=[exp.If(this=exp.Not(this=exp.Is(this=x.copy(), expression=exp.null())), true=m.copy())]
    )
    return exp.Sum(this=exp.Coalesce(this=case, expressions=[exp.Literal.number(0)]))


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table)


# How each kind is kept, in a line (``python -m duckstream explain``: the table above).
KEPT = {
    "count_star": "old + Δ (the group's row count)",
    "count": "old + Δ (non-NULL count)",
    "sum": "old + Δ (sum and non-NULL count)",
    "avg": "sum / count, each old + Δ",
    "min": "least(old, Δ) on insert; the group rescanned when its extreme may be deleted",
    "max": "greatest(old, Δ) on insert; the group rescanned when its extreme may be deleted",
    "holistic": "the groups the delta touches rescanned from the sources",
}


@dataclass
class AggregateSpec:
    """One distinct aggregate call of the view, numbered ``index``."""

    node: exp.Expr
    index: int

    @property
    def kind(self) -> str:
        node = self.node
        if isinstance(node, exp.Count):
            if isinstance(node.this, exp.Star) or node.this is None:
                return "count_star"
            if isinstance(node.this, exp.Distinct):
                return "holistic"
            return "count"
        if type(node) in ALGEBRAIC and not isinstance(node.this, exp.Distinct):
            return type(node).__name__.lower()
        return "holistic"

    @property
    def arg(self) -> exp.Expr:
        return self.node.this

    @property
    def base(self) -> str:
        return f"_ivm_a{self.index}"

    def hidden_columns(self) -> list[str]:
        kind = self.kind
        if kind == "count_star":
            return []
        if kind in ("sum", "avg"):
            return [self.base, f"{self.base}_n"]
        return [self.base]

    def needs_netting(self) -> bool:
        return self.kind in ("min", "max")

    def argument(self) -> exp.Expr | None:
        """The expression whose value the delta rows must carry (``_ivm_x<index>``)."""
        return None if self.kind in ("count_star", "holistic") else self.arg

    def read_columns(self) -> list[exp.Expr]:
        """Every column a holistic aggregate reads (its arguments, ORDER BY, ...).

        It takes no value from the delta rows (the group is rescanned), but when the delta is
        netted by content those columns must be part of the content: an update that changes
        only them must still reach the group, not cancel out.

        >>> from sqlglot import parse_one
        >>> node = parse_one("SELECT string_agg(t.a, ',' ORDER BY t.b) FROM t").find(exp.AggFunc)
        >>> [c.sql() for c in AggregateSpec(node, 0).read_columns()]
        ['t.a', 't.b']
        """
        if self.kind != "holistic":
            return []
        columns = {c.sql(): c for c in self.node.find_all(exp.Column)}
        return [c.copy() for _, c in sorted(columns.items())]

    def delta_items(self, x: exp.Expr, m: exp.Expr) -> list[exp.Expr]:
        """Aggregates over the delta rows of one group (x = argument, m = multiplicity)."""
        kind, base = self.kind, self.base
        if kind == "count":
            return [exp.alias_(_nonnull_mult(x, m), base)]
        if kind in ("sum", "avg"):
            return [
                exp.alias_(exp.Sum(this=exp.Mul(this=x.copy(), expression=m.copy())), base),
                exp.alias_(_nonnull_mult(x, m), f"{base}_n"),
            ]
        if kind in ("min", "max"):
            fn = exp.Min if kind == "min" else exp.Max
            inserted = exp.Case(
                ifs=[
                    exp.If(
                        this=exp.GT(this=m.copy(), expression=exp.Literal.number(0)), true=x.copy()
                    )
                ]
            )
            deleted = exp.Case(
                ifs=[
                    exp.If(
                        this=exp.LT(this=m.copy(), expression=exp.Literal.number(0)), true=x.copy()
                    )
                ]
            )
            return [
                exp.alias_(fn(this=inserted), f"{base}_ins"),
                exp.alias_(fn(this=deleted), f"{base}_del"),
            ]
        return []

    def state_items(self) -> list[exp.Expr]:
        """Aggregates over plain rows of one group: initial fill and rescans."""
        kind, base = self.kind, self.base
        if kind == "count_star":
            return []
        if kind == "count":
            return [exp.alias_(exp.Count(this=self.arg.copy()), base)]
        if kind in ("sum", "avg"):
            return [
                exp.alias_(exp.Sum(this=self.arg.copy()), base),
                exp.alias_(exp.Count(this=self.arg.copy()), f"{base}_n"),
            ]
        if kind in ("min", "max"):
            fn = exp.Min if kind == "min" else exp.Max
            return [exp.alias_(fn(this=self.arg.copy()), base)]
        return [exp.alias_(self.node.copy(), base)]

    def merged(self, old: str, delta: str) -> list[exp.Expr]:
        """New hidden values from the old row (may be missing) and the group's delta."""
        kind, base = self.kind, self.base
        zero = exp.Literal.number(0)

        def add(name: str) -> exp.Expr:
            return exp.alias_(
                exp.Add(
                    this=exp.Coalesce(this=_col(name, old), expressions=[zero.copy()]),
                    expression=exp.Coalesce(this=_col(name, delta), expressions=[zero.copy()]),
                ),
                name,
            )

        if kind == "count_star":
            return []
        if kind == "count":
            return [add(base)]
        if kind in ("sum", "avg"):
            return [add(base), add(f"{base}_n")]
        if kind in ("min", "max"):
            # LEAST/GREATEST skip NULLs on both engines; sqlglot's typed nodes would rewrite
            # them to propagate NULL, so call them by name.
            fn = "least" if kind == "min" else "greatest"
            merged = exp.Anonymous(
                this=fn, expressions=[_col(base, old), _col(f"{base}_ins", delta)]
            )
            return [exp.alias_(merged, base)]
        return [exp.alias_(_col(base, old), base)]

    def rescan_condition(self, old: str, delta: str) -> exp.Expr | None:
        """When the merged value cannot be trusted and the group must be rescanned."""
        kind, base = self.kind, self.base
        if kind == "holistic":
            return exp.true()
        if kind in ("min", "max"):
            deleted, current = _col(f"{base}_del", delta), _col(base, old)
            beyond = exp.LTE if kind == "min" else exp.GTE
            return exp.and_(
                exp.Not(this=exp.Is(this=deleted, expression=exp.null())),
                exp.or_(
                    exp.Is(this=current.copy(), expression=exp.null()),
                    beyond(this=deleted.copy(), expression=current.copy()),
                ),
            )
        return None

    def value(self, row: str, engine: Engine) -> exp.Expr:
        """The visible value of the aggregate, from hidden columns of ``row``."""
        kind, base = self.kind, self.base
        if kind == "count_star":
            return _col("_ivm_count", row)
        if kind in ("sum", "avg"):
            positive = exp.GT(this=_col(f"{base}_n", row), expression=exp.Literal.number(0))
            value = (
                _col(base, row)
                if kind == "sum"
                else engine.avg(_col(base, row), _col(f"{base}_n", row))
            )
            return exp.Case(ifs=[exp.If(this=positive, true=value)])
        return _col(base, row)
