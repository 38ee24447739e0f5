"""A source's old state read through a key filter, derived from its new state's read.

A delta statement often reads one source at both ends of the window through the same key
filter: ``(SELECT * FROM t AT (VERSION => cursor) WHERE k IN (<keys>))`` and the same at the
window's end (an aggregate's affected groups recomputed at both snapshots, TPC-H Q13). Each
read scans the source whole (the keys are scattered over its files), and it is the scan that
costs, not the rows kept: at SF 1, Q13 reads ``o_comment`` of 1.5 M orders twice to keep 16 k.

As multisets over the columns the view reads, the window's change copy (the engine's netted
changes, ``changes``) is ``t_new - t_old``, so for any filter ``F`` over those columns

    t_old ⋉ F  =  (t_new ⋉ F)  -  (changes ⋉ F)

Each row's count in ``t_old ⋉ F`` is its count in ``t_new ⋉ F`` minus its net multiplicity in
the changes, never negative: ``SELECT cols, SUM(m) ... GROUP BY cols HAVING SUM(m) > 0`` over
``t_new ⋉ F`` (+1 each) and the changes (minus their multiplicity), then each row repeated
``SUM(m)`` times. GROUP BY puts NULLs in one group, as the change copy's own netting does. The
new state's read is a CTE both reads share, so the statement scans the source once.

Only where it holds and pays: the read is ``SELECT * FROM <source> AT (<old version>) WHERE
F`` exactly; ``F`` reads only the source's columns that the view reads, unqualified, and
subqueries that reference nothing outside themselves but CTEs visible where the shared CTE
goes (the common ancestor of the reads); the columns the view reads are known; and the same
filter reads the source at the window's end in the same statement (else no scan is saved).
Both reads then select the columns the view reads (in name order), which is all any term
reads of a source's state.

>>> from sqlglot import parse_one
>>> q = parse_one(
...     "SELECT * FROM (SELECT * FROM t AT (VERSION => 1) WHERE k IN (SELECT x FROM d)) AS a"
...     " UNION ALL"
...     " SELECT * FROM (SELECT * FROM t AT (VERSION => 2) WHERE k IN (SELECT x FROM d)) AS b",
...     dialect="duckdb",
... )
>>> reads = {"t": ([exp.column("k"), exp.column("v")], exp.to_table("ch"), "1", "2")}
>>> out = derive_old_states(q, reads, lambda m: exp.Unnest(expressions=[exp.func("range", m)]))
>>> print(out.sql(dialect="duckdb"))  # doctest: +NORMALIZE_WHITESPACE
WITH _ivm_kept_0 AS MATERIALIZED (SELECT k, v FROM t AT (VERSION => 2) WHERE k IN (SELECT x
FROM d)) SELECT * FROM (SELECT k, v FROM (SELECT k, v, UNNEST(RANGE(_ivm_m)) AS _ivm_copy FROM
(SELECT k, v, CAST(SUM(_ivm_m) AS BIGINT) AS _ivm_m FROM (SELECT k, v, CAST(1 AS BIGINT) AS
_ivm_m FROM _ivm_kept_0 UNION ALL SELECT k, v, -_ivm_mult AS _ivm_m FROM ch WHERE k IN (SELECT
x FROM d)) AS _ivm_u GROUP BY k, v HAVING SUM(_ivm_m) > 0) AS _ivm_n) AS _ivm_c) AS a UNION ALL
SELECT * FROM (SELECT k, v FROM _ivm_kept_0) AS b
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from duckstream.engines.base import MULT

# Per source (by its table's SQL without time travel): the columns the view reads, its change
# copy (a table), and the SQL of its old and its new version expressions.
Reads = Mapping[str, tuple[list[exp.Expr], exp.Expr, str, str]]


@dataclass
class _Read:
    subquery: exp.Subquery
    source: str
    old: bool
    filter_sql: str


def _state_read(node: exp.Subquery, reads: Reads) -> _Read | None:
    """``node`` as ``(SELECT * FROM <source> AT (<version>) WHERE F)``, else None."""
    select = node.this
    if not isinstance(select, exp.Select):
        return None
    source = select.args.get("from_")
    where = select.args.get("where")
    if source is None or where is None or not isinstance(source.this, exp.Table):
        return None
    if len(select.expressions) != 1 or not isinstance(select.expressions[0], exp.Star):
        return None
    if any(select.args.get(k) for k in ("joins", "group", "having", "distinct", "limit", "with")):
        return None
    table = source.this
    when = table.args.get("when")
    if when is None or table.args.get("alias") is not None:
        return None
    plain = table.copy()
    plain.set("when", None)
    found = reads.get(plain.sql(dialect="duckdb"))
    if found is None:
        return None
    columns, _, old, new = found
    version = when.args.get("expression")
    spelled = version.sql(dialect="duckdb") if version is not None else None
    if spelled not in (old, new) or old == new:
        return None
    if not _filter_reads_only(where.this, {c.name for c in columns}):
        return None
    return _Read(
        node, plain.sql(dialect="duckdb"), spelled == old, where.this.sql(dialect="duckdb")
    )


def _filter_reads_only(condition: exp.Expr, columns: set[str]) -> bool:
    """Whether ``condition`` reads, outside its subqueries, only unqualified ``columns``, and
    its subqueries read no column of a table they do not name themselves."""
    outside = [c for c in condition.find_all(exp.Column) if not _in_query(c, condition)]
    if any(c.table or c.name not in columns for c in outside):
        return False
    for query in condition.find_all(exp.Query):
        named = {t.alias_or_name for t in query.find_all(exp.Table, exp.Subquery)}
        named |= {t.name for t in query.find_all(exp.Table)}
        for column in query.find_all(exp.Column):
            if column.table and column.table not in named:
                return False
    return True


def _in_query(node: exp.Expr, top: exp.Expr) -> bool:
    """Whether a query under ``top`` holds ``node``."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, exp.Query):
            return True
        parent = parent.parent
    return False


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    found = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found


def _common_query(nodes: list[exp.Subquery]) -> exp.Query | None:
    """The innermost query (SELECT or set operation, not an operand of one) holding every
    node, none of them in its WITH."""
    chains = [_ancestors(n) for n in nodes]
    shared = [a for a in chains[0] if all(any(a is b for b in c) for c in chains[1:])]
    for ancestor in shared:
        if isinstance(ancestor, exp.Query) and not isinstance(ancestor.parent, exp.SetOperation):
            # an operand of a set operation takes no WITH of its own: the chain's top does
            with_ = ancestor.args.get("with_")
            if with_ is not None and any(any(a is with_ for a in c) for c in chains):
                return None  # a read inside one of its CTEs: the new CTE would come after it
            return ancestor
    return None


def _ctes_between(node: exp.Expr, top: exp.Expr) -> set[str]:
    """The CTE names defined by queries strictly under ``top`` that hold ``node``."""
    names: set[str] = set()
    for ancestor in _ancestors(node):
        if ancestor is top:
            break
        with_ = ancestor.args.get("with_") if isinstance(ancestor, exp.Query) else None
        if with_ is not None:
            names |= {c.alias_or_name for c in with_.expressions}
    return names


def derive_old_states(
    query: exp.Expr, reads: Reads, copies: Callable[[exp.Expr], exp.Expr]
) -> exp.Expr:
    """``query`` with each old state read through a key filter derived from the new state's
    read through the same filter (see the module); ``copies``: the engine's select-list
    expression repeating its row ``m`` times. The input is not changed."""
    query = query.copy()
    groups: dict[tuple[str, str], list[_Read]] = {}
    for node in list(query.find_all(exp.Subquery)):
        read = _state_read(node, reads)
        if read is not None:
            groups.setdefault((read.source, read.filter_sql), []).append(read)
    counter = 0
    for (source, _), group in groups.items():
        if not any(r.old for r in group) or all(r.old for r in group):
            continue
        top = _common_query([r.subquery for r in group])
        if top is None:
            continue
        condition = group[0].subquery.this.args["where"].this
        names = {t.name for t in condition.find_all(exp.Table)}
        if any(names & _ctes_between(r.subquery, top) for r in group):
            continue
        columns, changes, _, _ = reads[source]
        kept = f"_ivm_kept_{counter}"
        counter += 1
        new_read = next(r for r in group if not r.old).subquery.this
        body = exp.select(*_copies(columns)).from_(new_read.args["from_"].copy())
        body = body.where(condition.copy(), copy=False)
        top.with_(kept, as_=body, materialized=True, append=True, copy=False)
        for read in group:
            if read.old:
                read.subquery.set("this", _old(kept, columns, changes, condition, copies))
            else:
                read.subquery.set("this", exp.select(*_copies(columns)).from_(kept))
    return query


def _copies(columns: list[exp.Expr]) -> list[exp.Expr]:
    return [c.copy() for c in columns]


def _old(
    kept: str,
    columns: list[exp.Expr],
    changes: exp.Expr,
    condition: exp.Expr,
    copies: Callable[[exp.Expr], exp.Expr],
) -> exp.Select:
    count = exp.column("_ivm_m")
    bigint = exp.DataType.build("bigint")
    plus = exp.select(
        *_copies(columns), exp.alias_(exp.cast(exp.Literal.number(1), bigint), "_ivm_m")
    )
    minus = exp.select(*_copies(columns), exp.alias_(exp.Neg(this=exp.column(MULT)), "_ivm_m"))
    both = exp.union(
        plus.from_(kept), minus.from_(changes.copy()).where(condition.copy()), distinct=False
    )
    total = exp.Sum(this=count.copy())
    netted = (
        exp.select(*_copies(columns), exp.alias_(exp.cast(total, bigint), "_ivm_m"))
        .from_(both.subquery("_ivm_u"))
        .group_by(*_copies(columns))
        .having(exp.GT(this=total.copy(), expression=exp.Literal.number(0)))
    )
    repeated = exp.select(*_copies(columns), exp.alias_(copies(count.copy()), "_ivm_copy")).from_(
        netted.subquery("_ivm_n")
    )
    return exp.select(*_copies(columns)).from_(repeated.subquery("_ivm_c"))
