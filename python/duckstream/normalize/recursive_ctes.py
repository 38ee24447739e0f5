"""A recursive CTE as a query the other rewrites can read: its two terms side by side.

``WITH RECURSIVE r AS (B UNION [ALL] S) ...`` (``S`` the recursive term, reading ``r`` once in
its FROM clause) becomes, wherever ``r`` is read, the derived table

    SELECT * FROM (B) AS _ivmrec_base
    UNION ALL SELECT * FROM (S') AS _ivmrec_step      -- _ivmrec_stepset under UNION

where ``S'`` is ``S`` with its reference to ``r`` replaced by ``(SELECT * FROM (B) AS
_ivmrec_self) AS r``: a stand-in with ``r``'s columns, so that qualifying, type pinning and
every other rewrite treat both terms as ordinary queries (the stand-in's rows are not the
CTE's; nothing evaluates this form). ``tree.build`` turns it into the recursive operator
(``tree.recursive``), which reads ``r`` where the stand-in stands, and :func:`restore`
writes it back as ``WITH RECURSIVE`` for a person (or a recomputation) to read.

Only linear recursion is taken: the recursive term a SELECT (no set operation) reading ``r``
exactly once, as a FROM item (not in a subquery, not under an outer join), with no
aggregate, DISTINCT, window, GROUP BY, ORDER BY or LIMIT; the base term not reading ``r``.
Everything else is refused by name (``recursive_cte``).

>>> from sqlglot import parse_one
>>> from duckstream.recursion import restore
>>> cte = parse_one("WITH RECURSIVE r(n) AS (SELECT k FROM t UNION ALL "
...     "SELECT e.b FROM r JOIN e ON e.a = r.n) SELECT n FROM r").args["with_"].expressions[0]
>>> stand_in(cte).sql()
'SELECT * FROM (SELECT k FROM t) AS _ivmrec_base(n) UNION ALL SELECT * FROM (SELECT e.b FROM (SELECT * FROM (SELECT k FROM t) AS _ivmrec_self(n)) AS r JOIN e ON e.a = r.n) AS _ivmrec_step'
>>> restore(parse_one(f"SELECT n FROM ({stand_in(cte).sql()}) AS r")).sql()
'SELECT n FROM (WITH RECURSIVE r(n) AS (SELECT k FROM t UNION ALL SELECT e.b FROM r JOIN e ON e.a = r.n) SELECT * FROM r) AS r'
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from duckstream.errors import UnsupportedSQLError
from duckstream.recursion import BASE, SELF, STEP, STEP_SET


def references(query: exp.Expr, name: str) -> list[exp.Table]:
    """The unqualified tables named ``name`` in ``query`` (its recursive references)."""
    return [
        t
        for t in query.find_all(exp.Table)
        if not t.args.get("db") and isinstance(t.this, exp.Identifier) and t.name.lower() == name
    ]


def _refuse(name: str, why: str) -> UnsupportedSQLError:
    return UnsupportedSQLError("recursive_cte", f"recursive CTE {name}: {why}")


def stand_in(cte: exp.CTE) -> exp.Query:
    """The stand-in query of a CTE that reads itself (see the module's docstring)."""
    name = cte.alias_or_name.lower()
    body = cte.this
    if not isinstance(body, exp.Union):
        raise _refuse(name, "the body must be `base UNION [ALL] recursive term`")
    base, step = body.this, body.expression
    while isinstance(step, exp.Subquery):
        step = step.this
    if references(base, name):
        raise _refuse(name, "the base term (before UNION) must not read the CTE itself")
    if not isinstance(step, exp.Select):
        raise _refuse(name, "the recursive term must be one SELECT, not a set operation")
    found = references(step, name)
    if len(found) != 1:
        raise _refuse(
            name,
            f"non-linear recursion: the recursive term reads the CTE {len(found)} times"
            " (only linear recursion, one reference, is maintained)",
        )
    reference = found[0]
    parent = reference.parent
    if not (
        (isinstance(parent, exp.From) and parent.parent is step)
        or (isinstance(parent, exp.Join) and parent.parent is step)
    ):
        raise _refuse(name, "the recursive reference must be a FROM item of the recursive term")
    if any((j.side or "") for j in step.args.get("joins") or []):
        raise _refuse(name, "an outer join in the recursive term")
    for key, what in (
        ("group", "GROUP BY"),
        ("having", "HAVING"),
        ("distinct", "DISTINCT"),
        ("order", "ORDER BY"),
        ("limit", "LIMIT"),
        ("offset", "OFFSET"),
        ("qualify", "QUALIFY"),
        ("with_", "a WITH"),
    ):
        if step.args.get(key):
            raise _refuse(name, f"{what} in the recursive term")
    if any(i.find(exp.AggFunc) for i in step.expressions):
        raise _refuse(name, "an aggregate in the recursive term")
    if any(step.find_all(exp.Window)):
        raise _refuse(name, "a window function in the recursive term")
    columns = cte.args["alias"].columns if cte.args.get("alias") else []

    def alias(marker: str) -> exp.TableAlias:
        return exp.TableAlias(
            this=exp.to_identifier(marker), columns=[c.copy() for c in columns] or None
        )

    self_relation = exp.select("*").from_(exp.Subquery(this=base.copy(), alias=alias(SELF)))
    reference_alias = reference.args.get("alias") or exp.TableAlias(
        this=exp.to_identifier(reference.name)
    )
    rewritten = step.copy()
    copy = references(rewritten, name)[0]
    copy.replace(exp.Subquery(this=self_relation, alias=reference_alias.copy()))
    marker = STEP if not body.args.get("distinct") else STEP_SET
    first = exp.select("*").from_(exp.Subquery(this=base.copy(), alias=alias(BASE)))
    second = exp.select("*").from_(exp.Subquery(this=rewritten, alias=exp.to_identifier(marker)))
    return exp.union(first, second, distinct=False)
