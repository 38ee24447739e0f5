"""Wrap a set operation at the top of the view in a SELECT: ``SELECT cols FROM (A op B) AS
_ivm_set``, so that the view's top is always a SELECT block (the sinks take one) and the set
operation becomes a derived table like any other. The first branch names the columns.

>>> from sqlglot import parse_one
>>> wrap_set_operation(parse_one("SELECT t.a AS a FROM t UNION ALL SELECT u.b AS b FROM u")).sql()
'SELECT _ivm_set.a AS a FROM (SELECT t.a AS a FROM t UNION ALL SELECT u.b AS b FROM u) AS _ivm_set'
>>> wrap_set_operation(parse_one("SELECT t.a AS a FROM t")).sql()
'SELECT t.a AS a FROM t'
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.expressions import aliased


def wrap_set_operation(expression: exp.Expr) -> exp.Expr:
    if not isinstance(expression, exp.SetOperation):
        return expression
    return select_from(expression.copy(), "_ivm_set")


def output_names(query: exp.Expr) -> list[exp.Identifier]:
    """The output column names of a (qualified) query: its first branch's select list."""
    while isinstance(query, exp.SetOperation | exp.Subquery):
        query = query.this
    assert isinstance(query, exp.Select), query
    names = []
    for item in query.expressions:
        name = item.args.get("alias") if isinstance(item, exp.Alias) else item.this
        if isinstance(name, exp.TableAlias):
            name = name.this
        assert isinstance(name, exp.Identifier), f"unnamed select item {item.sql()}"
        names.append(name)
    return names


def select_from(query: exp.Query, alias: str, distinct: bool = False) -> exp.Select:
    """``SELECT [DISTINCT] alias.c AS c, ... FROM (query) AS alias`` over ``query``'s columns."""
    items = [
        exp.alias_(exp.Column(this=n.copy(), table=exp.to_identifier(alias)), n.copy())
        for n in output_names(query)
    ]
    select = exp.select(*items).from_(aliased(query, alias))
    return select.distinct() if distinct else select
