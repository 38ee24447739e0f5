"""The stand-in of a recursive CTE: how ``normalize.recursive_ctes`` spells ``WITH RECURSIVE
r AS (B UNION [ALL] S)`` for the other rewrites (its two terms side by side, ``r`` read in
``S`` through a stand-in with its columns), read by the operator tree (:func:`parts`,
:func:`self_reference`) and written back as ``WITH RECURSIVE`` (:func:`restore`) for a
person or a recomputation. Shared vocabulary under the normalizer and the tree.

>>> from sqlglot import parse_one
>>> stand_in = parse_one("SELECT * FROM (SELECT k FROM t) AS _ivmrec_base(n) UNION ALL SELECT * FROM"
...     " (SELECT e.b FROM (SELECT * FROM (SELECT k FROM t) AS _ivmrec_self(n)) AS r"
...     " JOIN e ON e.a = r.n) AS _ivmrec_step")
>>> restore(stand_in).sql()
'WITH RECURSIVE r(n) AS (SELECT k FROM t UNION ALL SELECT e.b FROM r JOIN e ON e.a = r.n) SELECT * FROM r'
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

BASE = "_ivmrec_base"
STEP = "_ivmrec_step"  # UNION ALL
STEP_SET = "_ivmrec_stepset"  # UNION
SELF = "_ivmrec_self"
# the meta key of a ``WITH RECURSIVE`` the operator tree writes (``tree.recursive``): its
# depth bound and the error beyond it, ``(max_recursion_depth, message)``, for an engine that
# evaluates the recursion by iterating it (Spark) to stop at the same bound
BOUND = "recursion_bound"


def parts(query: exp.Expr) -> tuple[exp.Query, exp.Select, bool] | None:
    """``(base term, recursive term, UNION's set semantics)`` of a stand-in, else ``None``."""
    if not isinstance(query, exp.Union) or query.args.get("distinct"):
        return None
    first, second = query.this, query.expression
    if not (isinstance(first, exp.Select) and isinstance(second, exp.Select)):
        return None
    base, step = first.args.get("from_"), second.args.get("from_")
    if base is None or step is None:
        return None
    if not (isinstance(base.this, exp.Subquery) and isinstance(step.this, exp.Subquery)):
        return None
    if base.this.alias_or_name != BASE or step.this.alias_or_name not in (STEP, STEP_SET):
        return None
    recursive = step.this.this
    assert isinstance(recursive, exp.Select)
    return base.this.this, recursive, step.this.alias_or_name == STEP_SET


def self_reference(node: exp.Expr) -> bool:
    """Whether ``node`` is the recursive term's stand-in for the CTE (``(SELECT ... FROM
    (B) AS _ivmrec_self) AS r``)."""
    if not isinstance(node, exp.Subquery) or not isinstance(node.this, exp.Select):
        return False
    source = node.this.args.get("from_")
    return (
        source is not None
        and isinstance(source.this, exp.Subquery)
        and source.this.alias_or_name == SELF
    )


def restore(expression: exp.Expr) -> exp.Expr:
    """Each stand-in written back as ``(WITH RECURSIVE r AS (B UNION [ALL] S) SELECT * FROM
    r)``, ``r`` the name the recursive term reads it by."""

    def back(node: exp.Expr) -> exp.Expr:
        found = parts(node)
        if found is None:
            return node
        base, step, distinct = found
        step = step.copy()
        reference = next(n for n in step.find_all(exp.Subquery) if self_reference(n))
        name = reference.alias_or_name
        columns = reference.this.args["from_"].this.args["alias"].columns
        reference.replace(exp.Table(this=exp.to_identifier(name)))
        cte = exp.CTE(
            this=exp.union(base.copy(), step, distinct=distinct),
            alias=exp.TableAlias(
                this=exp.to_identifier(name), columns=[c.copy() for c in columns] or None
            ),
        )
        query = exp.select("*").from_(exp.Table(this=exp.to_identifier(name)))
        query.set("with_", exp.With(expressions=[cte], recursive=True))
        return query

    return expression.transform(back)
