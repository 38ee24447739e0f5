"""Inline CTEs as derived tables, with SQL's scoping; a recursive one as the stand-in of
``normalize.recursive_ctes`` (in a ``WITH RECURSIVE``, a CTE whose body reads its own name).

A CTE body sees the CTEs defined before it in the same WITH (and those of enclosing queries),
not itself nor later ones: inside its own body a CTE's name means the table of that name. A
WITH nested in a subquery or in a CTE body shadows outer CTEs of the same name for that
query only. A qualified name (``main.t``) is always a table. Names match case-insensitively,
as on DuckDB and Spark. A CTE used twice becomes two derived tables, each marked with the CTE
it came from (:data:`CTE_MARK` in its ``meta``: the CTE's name and its place in the query),
so that the operator tree can compute a CTE's delta and states once for all its references
(:mod:`duckstream.tree.shared_cte`); the SQL is the same with or without the marks.

>>> from sqlglot import parse_one
>>> inline_ctes(parse_one("WITH c AS (SELECT a FROM t) SELECT a FROM c")).sql()
'SELECT a FROM (SELECT a FROM t) AS c'
>>> inline_ctes(parse_one(
...     "WITH s AS (SELECT id FROM t), r AS (SELECT id FROM s) SELECT id FROM r")).sql()
'SELECT id FROM (SELECT id FROM (SELECT id FROM t) AS s) AS r'
>>> inline_ctes(parse_one("WITH t AS (SELECT id FROM t WHERE id > 0) SELECT id FROM t")).sql()
'SELECT id FROM (SELECT id FROM t WHERE id > 0) AS t'
>>> inline_ctes(parse_one("WITH c(x) AS (SELECT a FROM t) SELECT c1.x FROM c AS c1, c")).sql()
'SELECT c1.x FROM (SELECT a FROM t) AS c1(x), (SELECT a FROM t) AS c(x)'
>>> q = inline_ctes(parse_one("WITH c AS (SELECT a FROM t) SELECT * FROM c AS x, c AS y"))
>>> [s.meta[CTE_MARK] for s in q.find_all(exp.Subquery)]
['c_0', 'c_0']
"""

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import CTE_MARK, map_children
from duckstream.normalize.recursive_ctes import references, stand_in


def inline_ctes(expression: exp.Expr) -> exp.Expr:
    return _inline(expression.copy(), {}, [0])


def _inline(node: exp.Expr, ctes: dict[str, exp.CTE], numbered: list[int]) -> exp.Expr:
    """Replace references to ``ctes`` (lower-cased name -> CTE, bodies already inlined) in
    ``node``, in place, and return the (possibly replaced) node. ``numbered``: how many CTEs
    were seen so far (one counter for the whole query: two CTEs of one name in different
    scopes get different marks)."""
    with_ = node.args.get("with_")
    if isinstance(with_, exp.With):
        ctes = dict(ctes)
        if with_.args.get("recursive"):
            _refuse_mutual_recursion(with_)
        for cte in with_.expressions:
            if with_.args.get("recursive") and references(cte.this, cte.alias_or_name.lower()):
                # read as its stand-in (normalize.recursive_ctes): this name is the CTE in
                # its own body, later names are not yet. Not marked: a recursive CTE read
                # twice is evaluated twice, not shared (tree.shared_cte)
                cte.set("this", _inline(stand_in(cte), ctes, numbered))
            else:
                cte.set("this", _inline(cte.this, ctes, numbered))
                cte.meta[CTE_MARK] = f"{cte.alias_or_name.lower()}_{numbered[0]}"
                numbered[0] += 1
            ctes[cte.alias_or_name.lower()] = cte
        node.set("with_", None)
    if isinstance(node, exp.Table) and _is_reference(node, ctes):
        return _derived(node, ctes[node.name.lower()])
    return map_children(node, lambda child: _inline(child, ctes, numbered))


def _refuse_mutual_recursion(with_: exp.With) -> None:
    """In a WITH RECURSIVE, a body that reads a CTE defined after it (mutual recursion)."""
    names = [c.alias_or_name.lower() for c in with_.expressions]
    for i, cte in enumerate(with_.expressions):
        for later in names[i + 1 :]:
            if references(cte.this, later):
                raise UnsupportedSQLError(
                    "recursive_cte",
                    f"mutual recursion: CTE {names[i]} reads {later}, defined after it",
                )


def _is_reference(table: exp.Table, ctes: dict[str, exp.CTE]) -> bool:
    return (
        not table.args.get("db")
        and isinstance(table.this, exp.Identifier)
        and table.name.lower() in ctes
    )


def _derived(table: exp.Table, cte: exp.CTE) -> exp.Subquery:
    """``(body) AS alias``: the reference's alias (or the CTE's name), with the CTE's column
    list unless the reference gives its own."""
    cte_alias = cte.args.get("alias")
    alias = table.args.get("alias")
    if alias is None:
        alias = exp.TableAlias(this=exp.to_identifier(table.name))
    alias = alias.copy()
    if not alias.columns and cte_alias is not None and cte_alias.columns:
        alias.set("columns", [c.copy() for c in cte_alias.columns])
    derived = exp.Subquery(this=cte.this.copy(), alias=alias)
    if CTE_MARK in cte.meta:  # a recursive CTE's stand-in is not shared
        derived.meta[CTE_MARK] = cte.meta[CTE_MARK]
    return derived
