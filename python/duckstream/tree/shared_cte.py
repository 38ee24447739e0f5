"""Shared CTE: a CTE the view reads more than once, its delta and states computed once.

Delta rule: ``Δ(ρ_a(C)) = ρ_a(ΔC)``, as for any derived table (:mod:`.derived`); what
differs is where ``ΔC`` comes from. A CTE is inlined as one derived table per reference
(:mod:`duckstream.normalize.inline_ctes`), so each reference would compute ``ΔC``, and its
states ``C_old`` and ``C_new``, again: TPC-H Q15 reads ``revenue`` in its FROM and under
``max()``, and its delta statement scanned lineitem 14 times. Here ``ΔC``, ``C_old`` and
``C_new`` are each materialized once per refresh into a temporary table (a step before the
statements that read it), and every reference reads that table: ``ρ_a(SELECT * FROM t)``. A
key filter a term puts on a reference then filters the table (``SELECT * FROM t WHERE k IN
(...)``, :func:`~duckstream.tree.key_filters.push_key_filter`).

Only where it pays (:func:`choose`): the compiler first generates the refresh with every part
read from its table, counts the reads, then generates it again with tables for the parts that
are read twice or more: the delta always then, unless it reads nothing but the change copies
(a projection of the changes: cheap to compute twice); a state only when one of its reads is
whole (no key filter: a ``max()`` over the CTE), since a state read through key filters alone
is cheaper inlined than computed whole. A table is made only in the refresh windows where a read
of it runs (a guard of the change flags around its reads). The rebuild inlines, as before.

Delta by difference (:func:`difference`): where both states get a table (each read whole), the
delta is their difference instead of a third computation from the sources. As signed
multisets ``C_new = C_old + ΔC``, so for each distinct row ``r``: ``ΔC(r) = n_new(r) -
n_old(r)``, its count in ``C_new`` minus its count in ``C_old``; ``SELECT cols, SUM(m) FROM
(C_new with m = +1 UNION ALL C_old with m = -1) GROUP BY cols HAVING SUM(m) <> 0`` computes
exactly that. GROUP BY puts NULLs in one group, the row identity ``IS NOT DISTINCT FROM``
that the view's apply matches rows by; duplicates count (a row twice in ``C_new`` and once
in ``C_old``: ``+1``). It costs one hash aggregate over the two tables (TPC-H Q15 at SF 1:
3 ms, where its delta from lineitem's two states took 160). Any read of the delta then reads
both states' tables: their guards widen to the delta's (:func:`read_by_difference`).

>>> from sqlglot import parse_one
>>> step = parse_one("SELECT * FROM (SELECT * FROM t_old WHERE k IN (SELECT 1)) AS a, t_old")
>>> counted = count_reads([step], {"c_0_old": "t_old"})
>>> counted["c_0_old"].reads, counted["c_0_old"].whole
(2, 1)
>>> sorted(choose(counted))
['c_0_old']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar

import sqlglot
from sqlglot import exp

from duckstream.engines.base import MULT, Engine, Version
from duckstream.expressions import CTE_MARK, aliased
from duckstream.plan import CreateTemp, Sql, Step
from duckstream.scans import guards_around
from duckstream.tree.base import Context, col, mult_column, union_all
from duckstream.tree.derived import Derived


def shared_ctes(select: exp.Expr) -> dict[tuple[str, str], str]:
    """The CTEs ``select`` reads more than once: (mark, body SQL) -> the key naming their
    tables. A reference counts with the others of its CTE only where its body is still the
    same SQL after the rewrites that followed the inlining.

    >>> from duckstream.normalize.inline_ctes import inline_ctes
    >>> from sqlglot import parse_one
    >>> q = inline_ctes(parse_one("WITH c AS (SELECT a FROM t) SELECT * FROM c AS x, c AS y"))
    >>> shared_ctes(q)
    {('c_0', 'SELECT a FROM t'): 'c_0'}
    """
    groups: dict[tuple[str, str], int] = {}
    for derived in select.find_all(exp.Subquery):
        mark = derived.meta.get(CTE_MARK)
        if mark is not None:
            body = (mark, derived.this.sql())
            groups[body] = groups.get(body, 0) + 1
    keys: dict[tuple[str, str], str] = {}
    for i, body in enumerate(b for b, n in groups.items() if n > 1):
        plain = re.sub(r"[^a-z0-9_]", "_", body[0].lower())[:40]  # names its tables
        keys[body] = plain if plain not in keys.values() else f"{plain}_{i}"
    return keys


@dataclass
class SharedCte(Derived):
    """A reference to the CTE ``key`` (its mark, :data:`~duckstream.normalize.inline_ctes.
    CTE_MARK`): a derived table whose query other references share."""

    rule: ClassVar[str] = (
        "ρ(ΔC): the CTE's delta, computed once per refresh for all references"
        " (C_new - C_old where both states are tables)"
    )
    key: str = ""

    def state(self, ctx: Context, version: Version) -> exp.Expr:
        shares = ctx.shares
        if shares is None or version is Version.CURRENT:
            return super().state(ctx, version)
        part = f"{self.key}_{version.value}"
        table = shares.table(part, lambda: self.query.state(ctx, version))
        if table is None:
            with shares.nested_reads():
                return super().state(ctx, version)
        return aliased(exp.select("*").from_(table), self.alias_node)

    def delta_within(
        self, ctx: Context, wanted: dict[str, exp.Query]
    ) -> tuple[exp.Expr, exp.Expr] | None:
        return None  # the references share one delta, computed whole

    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        shares = ctx.shares
        if shares is None:
            return super().delta(ctx)
        names = self.query.columns()
        states = self._state_tables(ctx, shares, names)
        if states is not None:  # both states made whole anyway: their difference is cheap

            def query() -> exp.Expr:
                return difference(*states, names)
        else:

            def query() -> exp.Expr:
                return self.query.delta(ctx)

        table = shares.table(f"{self.key}_delta", query)
        if table is None:
            if states is not None:
                return aliased(query(), self.alias_node), mult_column(self.name)
            with shares.nested_reads():
                return super().delta(ctx)
        return aliased(exp.select("*").from_(table), self.alias_node), mult_column(self.name)

    def _state_tables(
        self, ctx: Context, shares: Shares, names: list[str]
    ) -> tuple[exp.Table, exp.Table] | None:
        """The tables of the CTE's old and new states, when both are made (see
        :func:`by_difference`) and its columns have distinct names (the difference groups
        by them), else ``None``."""
        if not by_difference(self.key, shares.chosen) or len(set(names)) < len(names):
            return None
        old = shares.table(f"{self.key}_old", lambda: self.query.state(ctx, Version.OLD))
        new = shares.table(f"{self.key}_new", lambda: self.query.state(ctx, Version.NEW))
        if old is None or new is None:
            return None
        return old, new


def by_difference(key: str, chosen: frozenset[str] | None) -> bool:
    """Whether the delta of the CTE ``key`` is the difference of its states' tables: both
    states have one (see the module docstring)."""
    return chosen is not None and {f"{key}_old", f"{key}_new"} <= chosen


def difference(old: exp.Table, new: exp.Table, names: list[str]) -> exp.Select:
    """``ΔC = C_new - C_old`` from the two states' tables: each distinct row with its count
    in ``new`` minus its count in ``old``, where not zero (the module docstring's algebra).

    >>> print(difference(exp.to_table("c_old"), exp.to_table("c_new"), ["k"]).sql())
    SELECT k, CAST(SUM(_ivm_mult) AS BIGINT) AS _ivm_mult FROM (SELECT k, CAST(1 AS BIGINT) \
AS _ivm_mult FROM c_new UNION ALL SELECT k, CAST(-1 AS BIGINT) AS _ivm_mult FROM c_old) AS \
_ivm_d GROUP BY k HAVING SUM(_ivm_mult) <> 0
    """
    sides = [
        exp.select(*(col(n) for n in names))
        .select(exp.alias_(exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint")), MULT))
        .from_(table.copy())
        for table, sign in ((new, 1), (old, -1))
    ]
    return (
        exp.select(*(col(n) for n in names))
        .select(exp.alias_(exp.cast(exp.Sum(this=col(MULT)), exp.DataType.build("bigint")), MULT))
        .from_(aliased(union_all(sides), "_ivm_d"))
        .group_by(*(col(n) for n in names))
        .having(exp.NEQ(this=exp.Sum(this=col(MULT)), expression=exp.Literal.number(0)))
    )


@dataclass
class Shares:
    """The tables of the shared CTEs' parts (``<key>_delta``, ``<key>_old``, ``<key>_new``)
    while one refresh's steps are generated. ``chosen``: the parts given a table (``None``:
    the counting pass, every part read from its table, none made); ``guards``: per part, a
    condition under which every read of it in the refresh's statements runs (see
    :func:`guard`)."""

    engine: Engine
    chosen: frozenset[str] | None = None
    guards: dict[str, exp.Expr | None] = field(default_factory=dict)
    # the parts' queries in an order where a table comes after those its query reads
    made: dict[str, exp.Expr] = field(default_factory=dict)
    # parts asked for while the query of another part was made (for its table, or inlined):
    # read there under no guard
    nested: set[str] = field(default_factory=set)
    making: int = 0

    def temp(self, part: str) -> exp.Table:
        return self.engine.temp_table(f"_ivm_{self.engine.slug()}_cte_{part}")

    def table(self, part: str, query: Callable[[], exp.Expr]) -> exp.Table | None:
        """The table of ``part`` (made by a step of :meth:`steps`), or ``None`` when it has
        none: the reference inlines it."""
        if self.chosen is None:
            return self.temp(part)
        if part not in self.chosen:
            return None
        if self.making:
            self.nested.add(part)
        if part not in self.made:
            with self.nested_reads():
                made = query()  # may ask for the tables of the parts it reads: made first
            if not self._reads_states(made):  # the changes alone: cheap to compute again
                self.chosen = self.chosen - {part}
                return None
            self.made[part] = made
        return self.temp(part)

    @contextmanager
    def nested_reads(self) -> Generator[None]:
        """While the block runs, a table asked for is read inside a part's query (a table's,
        or an inlined one's): where the reads counted in the first pass were not, so under
        no guard."""
        self.making += 1
        try:
            yield
        finally:
            self.making -= 1

    def _reads_states(self, query: exp.Expr) -> bool:
        """Whether ``query`` scans a source table (a state) or the table of a CTE's state
        (a difference of states, :func:`difference`), not only the change copies."""
        sources = {(s.catalog, s.schema, s.name) for s in self.engine.sources}
        states = {self.temp(p).name for p in self.made if not p.endswith("_delta")}
        return any(
            (t.catalog, t.db, t.name) in sources or (t.name in states)
            for t in query.find_all(exp.Table)
        )

    def steps(self) -> list[Step]:
        """The steps that make the tables asked for, each under its guard (a false guard lets
        the engine skip the query: no reads when none of the reads of the table runs); a
        table read by another one's query under none."""
        steps: list[Step] = []
        for part, query in self.made.items():
            condition = None if part in self.nested else self.guards.get(part)
            if condition is not None:
                query = exp.select("*").from_(exp.paren(query).as_("_ivm_s")).where(condition)
            steps.append(self.engine.create_temp(self.temp(part), query))
        return steps


@dataclass
class Reads:
    """How a part's table is read in a refresh: ``reads`` in all, ``whole`` of them with no
    filter, and the change-flag guards around each read (``None``: a read always runs)."""

    reads: int = 0
    whole: int = 0
    guards: list[tuple[frozenset[str], ...]] = field(default_factory=list)


def count_reads(
    steps: Sequence[Step | exp.Expr],
    tables: dict[str, str],
    dialect: str = "duckdb",
    flags: dict[exp.Expr, str] | None = None,
) -> dict[str, Reads]:
    """The reads of each part's table (``tables``: part -> table name) in ``steps``:
    expression trees, :class:`CreateTemp` queries, or :class:`Sql` statements (parsed in
    ``dialect`` when they name a table). ``flags``: the engines' change flags, by source, to
    find the guards around each read (:func:`duckstream.scans.source_reads`)."""
    by_name = {name: part for part, name in tables.items()}
    counted = {part: Reads() for part in tables}
    for step in steps:
        if isinstance(step, CreateTemp):
            trees: list[exp.Expr] = [step.query]
        elif isinstance(step, Sql):
            if not any(name in step.statement for name in by_name):
                continue
            trees = [t for t in sqlglot.parse(step.statement, dialect=dialect) if t is not None]
        elif isinstance(step, exp.Expr):
            trees = [step]
        else:
            continue
        for tree in trees:
            for table in tree.find_all(exp.Table):
                part = by_name.get(table.name)
                if part is None:
                    continue
                read = counted[part]
                read.reads += 1
                select = table.parent.parent if table.parent is not None else None
                if not (isinstance(select, exp.Select) and select.args.get("where")):
                    read.whole += 1
                read.guards.append(guards_around(table, flags or {}))
    return counted


def choose(counted: dict[str, Reads]) -> frozenset[str]:
    """The parts worth a table: read twice or more, and a state only when one read of it is
    whole (see the module docstring)."""
    return frozenset(
        part
        for part, read in counted.items()
        if read.reads >= 2 and (part.endswith("_delta") or read.whole >= 1)
    )


def read_by_difference(counted: dict[str, Reads], chosen: frozenset[str]) -> dict[str, Reads]:
    """``counted``, where a CTE's delta is the difference of its states (:func:`by_difference`),
    with the delta's reads added to each state's: a state's table must be made wherever the
    delta is read (their guards widen)."""
    widened = dict(counted)
    for part, read in counted.items():
        key = part.removesuffix("_delta")
        if key != part and by_difference(key, chosen):
            for state in (f"{key}_old", f"{key}_new"):
                own = counted[state]
                widened[state] = Reads(own.reads, own.whole, own.guards + read.guards)
    return widened


def guard(read: Reads, changed: Callable[[str], exp.Expr]) -> exp.Expr | None:
    """A condition true whenever one of the reads runs (``None``: always): the disjunction of
    the change flags in their guards, unless a read has none. Wider than needed where a read
    has several guards, never narrower."""
    if not read.guards or any(not clauses for clauses in read.guards):
        return None
    sources = sorted({s for clauses in read.guards for clause in clauses for s in clause})
    return exp.paren(exp.or_(*(changed(s) for s in sources)))
