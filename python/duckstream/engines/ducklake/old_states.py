"""Key-filtered reads of one source in a statement share one scan; the old states come from it.

A delta statement reads a source many times through key filters on one column: an
aggregate's affected groups recomputed at both ends of the window (TPC-H Q13's order counts
per changed customer), a decorrelated subquery's groups read by several terms (Q17 reads
lineitem through the changed parts 8 times). Each read scans the source whole (the keys are
scattered over its files), and it is the scan that costs, not the rows kept: at SF 1, Q13
reads ``o_comment`` of 1.5 M orders twice to keep 16 k rows, Q17 lineitem 4 times.

So per source and key column, the reads ``(SELECT * FROM t AT (<version>) WHERE c IN (Q1)
AND ...)`` (or a state read whole whose SELECT, with no other relation than it and inner or
left joins after it, filters its rows by ``a.c IN (Qi)``) all read one CTE

    _ivm_kept_n = SELECT <cols> FROM t AT (<end>) WHERE c IN (Q1 UNION ALL Q2 UNION ALL ...)

each filtering it again by its own conditions: a read at the window's end is exactly that CTE
filtered. A read at the cursor is derived from it: as multisets over the columns the view
reads, the window's change copy (the engine's netted changes) is ``t_new - t_old``, so for
any filter ``F`` over those columns

    t_old ⋉ F  =  (t_new ⋉ F)  -  (changes ⋉ F)

Each row's count in ``t_old ⋉ F`` is its count in ``t_new ⋉ F`` minus its net multiplicity in
the changes, never negative: ``SELECT cols, SUM(m) ... GROUP BY cols HAVING SUM(m) > 0`` over
``t_new ⋉ F`` (+1 each) and the changes (minus their multiplicity), then each row repeated
``SUM(m)`` times. GROUP BY puts NULLs in one group, as the change copy's own netting does.

The shared CTE goes into the innermost query holding the reads (not into one of its CTEs:
the reads there are left out). A CTE a ``Qi`` reads that is not visible there moves there
with it (and the CTEs it reads in turn), defined before the shared CTE: where it only is
one of its name in the statement, reads no column of an outer query and is not recursive
(else that read is left out). Each ``Qi`` is read once in the shared CTE's filter however
many reads spell it alike.

TPC-H at SF 1, an append of 0.1 % new orders (refresh CPU, median of 3, before -> after):
Q13 469 -> 300 ms (recomputing: 311), Q17 480 -> 317, Q21 567 -> 458, Q22 239 -> 196, Q20
679 -> 596. What is left is mostly the one scan: Q13's ``o_comment`` of every order read for
16 k of them costs ~100 ms however the rows are picked (a semi-join, an IN list, rowids).

Only where it holds: each ``Qi`` is a subquery that reads no column of a table it does not
name itself; the columns the view reads are known (every read then selects those, in name
order: all any term reads of a source's state); the read's alias renames no column; and
at least two reads share the CTE.

>>> from sqlglot import parse_one
>>> q = parse_one(
...     "SELECT * FROM (SELECT * FROM t AT (VERSION => 1) WHERE k IN (SELECT x FROM d)) AS a"
...     " UNION ALL"
...     " SELECT * FROM (SELECT * FROM t AT (VERSION => 2) WHERE k IN (SELECT x FROM d)) AS b",
...     dialect="duckdb",
... )
>>> columns, versions = [exp.column("k"), exp.column("v")], (parse_one("1"), parse_one("2"))
>>> reads = {"t": (columns, exp.to_table("ch"), *versions)}
>>> out = derive_old_states(q, reads, lambda m: exp.Unnest(expressions=[exp.func("range", m)]))
>>> print(out.sql(dialect="duckdb"))  # doctest: +NORMALIZE_WHITESPACE
WITH _ivm_kept_0 AS MATERIALIZED (SELECT k, v FROM t AT (VERSION => 2) WHERE k IN (SELECT x
FROM d)) SELECT * FROM (SELECT k, v FROM (SELECT k, v, UNNEST(RANGE(_ivm_m)) AS _ivm_copy FROM
(SELECT k, v, CAST(SUM(_ivm_m) AS BIGINT) AS _ivm_m FROM (SELECT k, v, CAST(1 AS BIGINT) AS
_ivm_m FROM _ivm_kept_0 WHERE k IN (SELECT x FROM d) UNION ALL SELECT k, v, -_ivm_mult AS
_ivm_m FROM ch WHERE k IN (SELECT x FROM d)) AS _ivm_u GROUP BY k, v HAVING SUM(_ivm_m) > 0) AS
_ivm_n) AS _ivm_c) AS a UNION ALL SELECT * FROM (SELECT k, v FROM _ivm_kept_0 WHERE k IN
(SELECT x FROM d)) AS b
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlglot import exp

from duckstream.engines.base import MULT
from duckstream.expressions import uncorrelated
from duckstream.scans import guards_around

# Per source (by its table's SQL without time travel): the columns the view reads, its change
# copy (a table), and its old and its new version expressions.
Reads = Mapping[str, tuple[list[exp.Expr], exp.Expr, exp.Expr, exp.Expr]]


@dataclass
class _Read:
    subquery: exp.Subquery  # (SELECT * FROM t AT (...) [WHERE ...]) AS a
    source: str
    old: bool
    column: str
    conditions: list[exp.In]  # each ``column IN (query)``, unqualified


def _key_condition(condition: exp.Expr, alias: str | None) -> exp.In | None:
    """``condition`` as ``c IN (<query>)`` (``alias.c`` when ``alias``), unqualified, if its
    query reads no column of a table it does not name itself; else None."""
    if not isinstance(condition, exp.In) or not isinstance(condition.this, exp.Column):
        return None
    query = condition.args.get("query")
    if query is None or condition.args.get("expressions"):
        return None
    if (condition.this.table or None) != alias:
        return None
    named = {t.alias_or_name for t in query.find_all(exp.Table, exp.Subquery)}
    named |= {t.name for t in query.find_all(exp.Table)}
    if any(c.table and c.table not in named for c in query.find_all(exp.Column)):
        return None
    return exp.In(this=exp.Column(this=condition.this.this.copy()), query=query.copy())


def _conjuncts(where: exp.Expr | None) -> list[exp.Expr]:
    if where is None:
        return []
    condition = where.this
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _state_read(node: exp.Subquery, reads: Reads) -> _Read | None:
    """``node`` as ``(SELECT * FROM <source> AT (<version>) [WHERE c IN (...) AND ...])``,
    with the key conditions on it: its own and (one relation in the SELECT around it, or the
    first of inner and left joins) those of that SELECT's WHERE on its alias."""
    select = node.this
    if not isinstance(select, exp.Select):
        return None
    source = select.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        return None
    if len(select.expressions) != 1 or not isinstance(select.expressions[0], exp.Star):
        return None
    if any(
        select.args.get(k)
        for k in ("joins", "group", "having", "distinct", "limit", "offset", "with_", "qualify")
    ):
        return None
    table = source.this
    when = table.args.get("when")
    alias = node.args.get("alias")
    if when is None or table.args.get("alias") is not None or alias is None or alias.columns:
        return None
    plain = table.copy()
    plain.set("when", None)
    found = reads.get(plain.sql(dialect="duckdb"))
    if found is None:
        return None
    columns, _, old, new = found
    version = when.args.get("expression")
    spelled = version.sql(dialect="duckdb") if version is not None else None
    versions = (old.sql(dialect="duckdb"), new.sql(dialect="duckdb"))
    if spelled not in versions or versions[0] == versions[1]:
        return None
    own = [_key_condition(c, None) for c in _conjuncts(select.args.get("where"))]
    if any(c is None for c in own):
        return None
    conditions = [c for c in own if c is not None]
    outer = node.parent.parent if isinstance(node.parent, exp.From) else None
    if isinstance(outer, exp.Select) and all(
        j.side in ("", "LEFT") and j.kind in ("", "INNER", "CROSS", "OUTER") and not j.method
        for j in outer.args.get("joins") or []
    ):
        for condition in _conjuncts(outer.args.get("where")):
            key = _key_condition(condition, alias.name)
            if key is not None:
                conditions.append(key)
    names = {c.name for c in columns}
    keyed = {c.this.name for c in conditions}
    if len(keyed) != 1 or not keyed <= names:
        return None
    return _Read(node, plain.sql(dialect="duckdb"), spelled == versions[0], keyed.pop(), conditions)


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    found = []
    parent = node.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found


def _common_query(group: list[_Read]) -> tuple[exp.Query, list[_Read]] | None:
    """The innermost query (SELECT or set operation, not an operand of one) holding at least
    two of the reads, none of them in its WITH (the new CTE comes after its CTEs), and those
    reads: the reads in the CTEs of a query holding them all are left out."""
    while len(group) > 1:
        chains = [_ancestors(r.subquery) for r in group]
        shared = [a for a in chains[0] if all(any(a is b for b in c) for c in chains[1:])]
        top = next(
            (
                a
                for a in shared
                # an operand of a set operation takes no WITH of its own: the chain's top does
                if isinstance(a, exp.Query) and not isinstance(a.parent, exp.SetOperation)
            ),
            None,
        )
        if top is None:
            return None
        with_ = top.args.get("with_")
        inside = [with_ is not None and any(a is with_ for a in chain) for chain in chains]
        if not any(inside):
            return top, group
        group = [r for r, i in zip(group, inside, strict=True) if not i]
    return None


def _ctes_between(node: exp.Expr, top: exp.Expr) -> dict[str, exp.CTE]:
    """The CTEs (by name) of the queries strictly under ``top`` that hold ``node``."""
    found: dict[str, exp.CTE] = {}
    for ancestor in _ancestors(node):
        if ancestor is top:
            break
        with_ = ancestor.args.get("with_") if isinstance(ancestor, exp.Query) else None
        if with_ is not None:
            for cte in with_.expressions:
                found.setdefault(cte.alias_or_name, cte)
    return found


def _read_names(query: exp.Expr) -> set[str]:
    """The names of the unqualified tables ``query`` reads (the CTEs it may read)."""
    return {
        t.name
        for t in query.find_all(exp.Table)
        if not t.args.get("db") and not t.args.get("catalog")
    }


def _hoisted(
    queries: list[exp.Expr], hidden: dict[str, exp.CTE], counts: dict[str, int]
) -> list[exp.CTE] | None:
    """The CTEs of ``hidden`` that ``queries`` read, in turn (to move where the shared CTE
    goes); None when one is recursive, reads a column of an outer query or is not the only
    CTE of its name in the statement (moved, it could shadow another or be shadowed)."""
    found: list[exp.CTE] = []
    pending = [n for q in queries for n in sorted(_read_names(q)) if n in hidden]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        cte = hidden[name]
        with_ = cte.parent
        if (
            counts.get(name, 0) != 1
            or (isinstance(with_, exp.With) and with_.args.get("recursive"))
            or not uncorrelated(cte.this)
        ):
            return None
        found.append(cte)
        pending += [n for n in sorted(_read_names(cte.this)) if n in hidden]
    for cte in found:
        if any(any(a is other for a in _ancestors(cte)) for other in found):
            return None  # one inside another's body: moved with it, then defined after it
    return found


def _defined_first(ctes: list[exp.CTE]) -> list[exp.CTE]:
    """``ctes`` with each after the ones it reads: outer WITHs first (an inner CTE may read
    an outer one, never the reverse), each WITH's in its order (a CTE reads earlier ones)."""

    def key(cte: exp.CTE) -> tuple[int, int]:
        with_ = cte.parent
        index = next(i for i, c in enumerate(with_.expressions) if c is cte) if with_ else 0
        return (len(_ancestors(cte)), index)

    return sorted(ctes, key=key)


def _shared_keys(
    group: list[_Read], counts: dict[str, int]
) -> tuple[exp.Query, list[_Read], list[exp.Expr], list[exp.CTE]] | None:
    """Where the shared CTE of ``group`` goes (:func:`_common_query`), the reads that share
    it, the key queries of their conditions, and the CTEs those read that are not visible
    there (to move there first, :func:`_hoisted`); None when fewer than two reads can."""
    while True:
        found = _common_query(group)  # one read scans once either way
        if found is None:
            return None
        top, group = found
        keys: list[exp.Expr] = []
        moved: dict[int, exp.CTE] = {}
        kept: list[_Read] = []
        for read in group:
            queries = [c.args["query"] for c in read.conditions]
            hoisted = _hoisted(queries, _ctes_between(read.subquery, top), counts)
            if hoisted is None:
                continue
            kept.append(read)
            keys += [q.unnest() if isinstance(q, exp.Subquery) else q for q in queries]
            moved.update((id(c), c) for c in hoisted)
        # a read inside a CTE that moves would read the shared CTE before its definition
        kept = [
            r
            for r in kept
            if not any(a is c for a in _ancestors(r.subquery) for c in moved.values())
        ]
        if len(kept) == len(group):
            return top, group, keys, _defined_first(list(moved.values()))
        group = kept


def derive_old_states(
    query: exp.Expr,
    reads: Reads,
    copies: Callable[[exp.Expr], exp.Expr],
    flags: Mapping[str, exp.Expr] | None = None,
) -> exp.Expr:
    """``query`` with its key-filtered reads of a source through one column sharing one scan
    (see the module); ``copies``: the engine's select-list expression repeating its row ``m``
    times; ``flags``: per source, the engine's "changed in the window" flag: the shared scan
    runs under the guards of the reads it serves (:func:`_guard`), so it is skipped when none
    of them runs, and :mod:`duckstream.scans` weighs it where they ran. The input is not
    changed."""
    query = query.copy()
    groups: dict[tuple[str, str], list[_Read]] = {}
    for node in list(query.find_all(exp.Subquery)):
        read = _state_read(node, reads)
        if read is not None:
            groups.setdefault((read.source, read.column), []).append(read)
    counts: dict[str, int] = {}
    for cte in query.find_all(exp.CTE):
        counts[cte.alias_or_name] = counts.get(cte.alias_or_name, 0) + 1
    counter = 0
    for (source, _), group in groups.items():
        found = _shared_keys(group, counts)
        if found is None:
            continue
        top, group, keys, moved = found
        for cte in moved:
            with_ = cte.parent
            cte.pop()
            if isinstance(with_, exp.With) and not with_.expressions:
                with_.pop()
            materialized = cte.args.get("materialized")
            top.with_(cte.alias_or_name, as_=cte.this, materialized=materialized, copy=False)
        columns, changes, _, new = reads[source]
        kept = f"_ivm_kept_{counter}"
        counter += 1
        table = group[0].subquery.this.args["from_"].this.copy()
        table.args["when"].set("expression", new.copy())
        distinct = list({k.sql(dialect="duckdb"): k for k in keys}.values())
        union = distinct[0].copy()
        for key in distinct[1:]:  # each set once: a query read again is computed again
            union = exp.union(union, key.copy(), distinct=False)
        key = group[0].conditions[0].this.copy()  # the column as spelled (quoted or not)
        wanted = exp.In(this=key, query=exp.Subquery(this=union))
        body = exp.select(*_copies(columns)).from_(table).where(wanted, copy=False)
        guard = _guard([read.subquery for read in group], flags or {})
        if guard is not None:
            body = body.where(guard, copy=False)
        top.with_(kept, as_=body, materialized=True, append=True, copy=False)
        for read in group:
            own = exp.and_(*(c.copy() for c in read.conditions))
            if read.old:
                read.subquery.set("this", _old(kept, columns, changes, own, copies))
            else:
                read.subquery.set(
                    "this", exp.select(*_copies(columns)).from_(kept).where(own, copy=False)
                )
    return query


def _guard(readers: list[exp.Subquery], flags: Mapping[str, exp.Expr]) -> exp.Expr | None:
    """The condition under which any of ``readers`` runs: per reader, the conjunction of the
    guard clauses around it (each a disjunction of change flags,
    :func:`duckstream.scans.guards_around`), the readers' disjoined; None when one of them
    has none (it always runs).

    >>> from sqlglot import parse_one
    >>> t = exp.column("changed_t")
    >>> q = parse_one("SELECT * FROM (SELECT 1) AS a WHERE changed_t")
    >>> print(_guard([q.find(exp.Subquery)], {"t": t}).sql())
    (changed_t)
    """
    by_flag = {flag: name for name, flag in flags.items()}
    disjuncts: dict[str, exp.Expr] = {}  # by their SQL: two readers under one guard
    for reader in readers:
        clauses = guards_around(reader, by_flag)
        if not clauses:
            return None
        guard = exp.and_(*(exp.or_(*(flags[n].copy() for n in sorted(c))) for c in clauses))
        disjuncts.setdefault(guard.sql(), guard)
    return exp.paren(exp.or_(*disjuncts.values()))


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
        plus.from_(kept).where(condition.copy()),
        minus.from_(changes.copy()).where(condition.copy()),
        distinct=False,
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
