"""Correlation analysis of a subquery: which of its columns refer to an enclosing query, and
how the conjuncts of its WHERE correlate it (equalities ``inner = outer``, which become join
keys, or other comparisons over one outer table, which read that table's values from a
domain). What :mod:`.decorrelate_subqueries` and :mod:`.aggregate_inequalities` rewrite by.

>>> from sqlglot import parse_one
>>> q = parse_one("SELECT r.a FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.k = r.k AND s.b > 0)")
>>> [c.sql() for c in outer_columns(q.find(exp.Exists).this)]
['r.k']
>>> body = body_of(q.find(exp.Exists).this, q)
>>> body.query.sql(), [(i.sql(), o.sql()) for i, o in body.pairs]
('SELECT 1 FROM s WHERE s.b > 0', [('s.k', 'r.k')])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.normalize.wrap_set_operation import output_names


def subquery_error(node: exp.Expr, why: str) -> UnsupportedSQLError:
    text = node.sql()
    return UnsupportedSQLError("subquery", f"{why}: `{text if len(text) <= 80 else text[:77]}...`")


def _id(name: str) -> exp.Identifier:
    return exp.to_identifier(name)


def unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


@dataclass
class Body:
    """A subquery's query, without the equalities that correlate it."""

    query: exp.Query
    pairs: list[tuple[exp.Expr, exp.Expr]]  # (inner, outer) of each correlating equality
    # Correlated other than by equalities: the outer columns (of one outer table), and the
    # correlating conjuncts with those columns read from the placeholder table ``_ivm_dom``
    domain: list[exp.Column] = field(default_factory=list)
    domain_on: exp.Expr | None = None

    @property
    def correlated(self) -> bool:
        return bool(self.pairs or self.domain)

    @property
    def plain(self) -> bool:
        """A SELECT without aggregates, GROUP BY or HAVING: its FROM and WHERE can be reused."""
        query = self.query
        return (
            isinstance(query, exp.Select)
            and not query.args.get("group")
            and not query.args.get("having")
            and not any(i.find(exp.AggFunc) for i in query.expressions)
        )

    def values(self, node: exp.Expr) -> list[exp.Expr]:
        """The subquery's output columns, as expressions over its FROM when it is plain."""
        if self.plain:
            assert isinstance(self.query, exp.Select)
            return [i.unalias().copy() for i in self.query.expressions]
        if self.correlated:
            raise subquery_error(
                node, "a correlated subquery with GROUP BY, HAVING or an aggregate"
            )
        return [exp.column(n.copy(), "_ivm_b") for n in output_names(self.query)]

    def select(self, items: list[exp.Expr], node: exp.Expr) -> exp.Select:
        """``SELECT items FROM`` the subquery: its own FROM and WHERE when it is plain, else
        the subquery as a derived table ``_ivm_b``."""
        if self.plain:
            assert isinstance(self.query, exp.Select)
            select = self.query.copy()
            select.set("distinct", None)
            select.set("expressions", items)
            return select
        if self.correlated:
            raise subquery_error(
                node, "a correlated subquery with GROUP BY, HAVING or an aggregate"
            )
        inner = exp.Subquery(this=self.query.copy(), alias=exp.TableAlias(this=_id("_ivm_b")))
        return exp.select(*items).from_(inner)


def source_names(select: exp.Select) -> set[str]:
    """The names (aliases) of the tables in ``select``'s FROM and joins."""
    names = set()
    from_ = select.args.get("from_")
    if from_ is not None:
        names.add(from_.this.alias_or_name)
    for join in select.args.get("joins") or []:
        names.add(join.this.alias_or_name)
    return names


def outer_columns(query: exp.Expr) -> list[exp.Column]:
    """The columns in ``query`` bound by no SELECT between them and ``query`` (inclusive):
    references to an enclosing query."""
    found = []
    for column in query.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        if not column.table:
            raise subquery_error(
                column,
                "a column of a subquery must be qualified with its table (or pass"
                " schema=) so that duckstream knows which query it belongs to",
            )
        node: exp.Expr | None = column
        bound = False
        while node is not None and not bound:
            if isinstance(node, exp.Select) and column.table in source_names(node):
                bound = True
            if node is query:
                break
            node = node.parent
        if not bound:
            found.append(column)
    return found


def body_of(query: exp.Expr, node: exp.Expr) -> Body:
    """The subquery ``query`` split into its query and its correlating equalities."""
    query = unparen(query)
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    assert isinstance(query, exp.Query), query
    references = {id(c) for c in outer_columns(query)}
    if not references:
        return Body(query.copy(), [])
    if not isinstance(query, exp.Select):
        raise subquery_error(node, "a correlated set operation in a subquery")
    where = query.args.get("where")
    pairs, correlating, rest = [], [], []
    for conjunct in (
        where.this.flatten()
        if where is not None and isinstance(where.this, exp.And)
        else ([where.this] if where is not None else [])
    ):
        refs = [c for c in conjunct.find_all(exp.Column) if id(c) in references]
        if not refs:
            rest.append(conjunct)
            continue
        correlating.append((conjunct, refs))
        pair = equality(unparen(conjunct), references)
        if pair is not None:
            pairs.append(pair)
        references -= {id(c) for c in refs}
    if references:
        raise subquery_error(
            node, "a subquery may refer to the outer query only in its WHERE's conjuncts"
        )
    body = query.copy()
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    if len(pairs) == len(correlating):
        return Body(body, [(i.copy(), o.copy()) for i, o in pairs])
    return _domain_body(body, correlating, node)


def _domain_body(
    body: exp.Query, correlating: list[tuple[exp.Expr, list[exp.Column]]], node: exp.Expr
) -> Body:
    """A subquery correlated by comparisons other than ``inner = outer``: the outer columns
    become a domain table ``_ivm_dom`` and every correlating conjunct reads them from it.
    Each conjunct must be a comparison of columns, literals and arithmetic: UNKNOWN when an
    outer column is NULL, so that an outer row whose column is NULL, which the join to the
    domain by ``=`` leaves without a partner, would have found no match in SQL either."""
    tables = {c.table for _, refs in correlating for c in refs}
    if len(tables) != 1:
        raise subquery_error(
            node,
            "a subquery correlated other than by equalities `inner = outer` may read only one"
            " outer table",
        )
    domain: dict[str, exp.Column] = {}
    conjuncts = []
    for conjunct, refs in correlating:
        if not comparison_of_columns(unparen(conjunct)):
            raise subquery_error(
                node,
                "a subquery may be correlated only by comparisons (=, <>, <, <=, >, >=) of"
                " columns, literals and arithmetic",
            )
        ids = {id(c) for c in refs}
        for column in refs:
            domain.setdefault(column.name, column)
        copied = conjunct.copy()
        # walk the conjunct and its copy side by side: the outer columns by identity
        for original, column in zip(list(conjunct.walk()), list(copied.walk()), strict=True):
            if id(original) in ids:
                assert isinstance(column, exp.Column)
                column.set("table", _id("_ivm_dom"))
        conjuncts.append(copied)
    columns = [c.copy() for c in domain.values()]
    return Body(body, [], columns, exp.and_(*conjuncts))


# A comparison over these is UNKNOWN when any column in it is NULL.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_NULL_PROPAGATING = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Paren,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Cast,
    exp.DataType,
)


def comparison_of_columns(node: exp.Expr) -> bool:
    """A comparison (=, <>, <, <=, >, >=) of columns, literals and arithmetic: UNKNOWN when
    any column in it is NULL."""
    return isinstance(node, _COMPARISONS) and all(
        isinstance(n, _NULL_PROPAGATING)
        for side in (node.this, node.expression)
        for n in side.walk()
    )


def only_equalities(body: Body, node: exp.Expr) -> None:
    if body.domain:
        raise subquery_error(
            node,
            "only EXISTS and IN subqueries may be correlated other than by equalities"
            " `inner = outer`",
        )


def equality(node: exp.Expr, references: set[int]) -> tuple[exp.Expr, exp.Expr] | None:
    """(inner, outer) if ``node`` is ``inner = outer``, one side reading only the subquery's
    columns (at least one), the other only the outer query's (at least one)."""
    if not isinstance(node, exp.EQ):
        return None
    if any(n.find(exp.Query, exp.AggFunc) for n in (node.this, node.expression)):
        return None
    left, right = side_of(node.this, references), side_of(node.expression, references)
    if (left, right) == ("inner", "outer"):
        return node.this, node.expression
    if (left, right) == ("outer", "inner"):
        return node.expression, node.this
    return None


def side_of(expr: exp.Expr, references: set[int]) -> str | None:
    """``"outer"`` if ``expr`` reads only outer columns (``references``: their ids), ``"inner"``
    if only the subquery's, at least one either way; else None."""
    outer = [id(c) in references for c in expr.find_all(exp.Column)]
    if outer and all(outer):
        return "outer"
    if outer and not any(outer):
        return "inner"
    return None
