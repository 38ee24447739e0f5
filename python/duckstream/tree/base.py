"""What every operator shares: terms (open SELECT blocks) and closed relations.

A *term* is one SELECT block not yet given its select list: the FROM/JOIN tree with each leaf
replaced by a relation (a source's old or new state, or its changes), the WHERE conjuncts, the
multiplicity of its rows (``None`` for a state, where every row counts once) and run-time
guards (constants of one refresh that must hold for the term to have rows; a false guard lets
the engine skip the term without reading anything). Joins and filters produce terms; project
and aggregate close them into queries with named columns.

Keeping the user's FROM tree and aliases intact means column references resolve exactly as in
the view itself, whether or not they are qualified, without knowing the source schemas.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING

from sqlglot import exp

from duckstream.engines.base import MULT, Engine, Source, Version
from duckstream.expressions import conjuncts, ident, parenthesized, uncorrelated
from duckstream.tree.key_filters import (
    KEY_FILTER,
    KeyRange,
    implied_on,
    is_state,
    key_in,
    on_changes,
    on_or_where,
    only_column,
    push_key_filter,
    row_columns,
    uses_key_semijoins,
)

if TYPE_CHECKING:
    from duckstream.plan import Step
    from duckstream.tree.shared_cte import Shares

# Conditions every state term gets as a guard (:func:`gated_states`), innermost last.
_STATE_GATES: ContextVar[tuple[exp.Expr, ...]] = ContextVar("state_gates", default=())


@contextmanager
def gated_states(condition: exp.Expr) -> Generator[None]:
    """Add ``condition`` to the guards of every state term built while the block runs (its
    SELECTs over the sources' states, nested relations' too). For a relation read only when
    a test made at run time holds (a top-k's refill, :mod:`duckstream.tree.top_k`): the
    caller tests it above the relation too (a grouped or ungrouped aggregate over no rows is
    not no rows); in every SELECT beside the scans, it lets the engine skip them. DuckDB
    1.5.5 does, for ``EXISTS (<one-row table> WHERE <test>)``; above an aggregate it scans
    the aggregate's input whole first."""
    token = _STATE_GATES.set((*_STATE_GATES.get(), condition))
    try:
        yield
    finally:
        _STATE_GATES.reset(token)


def state_gates() -> tuple[exp.Expr, ...]:
    """The conditions :func:`gated_states` set, copied: the guards a state term gets."""
    return tuple(g.copy() for g in _STATE_GATES.get())


def col(name: str, table: str | None = None) -> exp.Column:
    """A reference to the column ``name`` (of ``table``), quoted only when it has to be."""
    return exp.Column(this=ident(name), table=exp.to_identifier(table) if table else None)


@dataclass(frozen=True)
class Term:
    """One SELECT block of a delta or a state, without its select list."""

    from_: exp.Expr
    joins: tuple[exp.Join, ...] = ()
    where: tuple[exp.Expr, ...] = ()
    mult: exp.Expr | None = None
    guards: tuple[exp.Expr, ...] = ()
    # The alias of the leaf whose changes this term reads, and a query of those changes (or
    # of their key columns, see :meth:`Leaf.delta_rows`) when re-reading it is cheap:
    # ``select`` then adds semi-join filters (see there).
    delta_alias: str | None = None
    delta_rows: exp.Expr | None = None
    # rewrites the term once its conditions are all known, before ``select`` spells it: the
    # changed leaf's delta restricted to the rows the term can join
    # (:func:`duckstream.tree.demand.narrow_delta`)
    narrow: Callable[[Term], Term] | None = field(default=None, compare=False)
    # the range of each column of the changed leaf's changes, as run-time constants, where
    # the engine gives one (:meth:`Leaf.delta_range`): ``select`` then adds range filters
    delta_range: Callable[[str], KeyRange | None] | None = field(default=None, compare=False)

    def filtered(self, *predicates: exp.Expr) -> Term:
        return replace(self, where=self.where + tuple(p.copy() for p in predicates))

    def multiplicity(self) -> exp.Expr:
        """The signed count each row of this term stands for."""
        if self.mult is None:
            return exp.cast(exp.Literal.number(1), exp.DataType.build("bigint"))
        return self.mult.copy()

    def select(self, *items: exp.Expr) -> exp.Select:
        """``SELECT items FROM ... WHERE ...`` for this term."""
        term = self.narrow(replace(self, narrow=None)) if self.narrow is not None else self
        term = term.with_filters(term.semijoin_filters())
        term = term.with_filters(term.range_filters())
        term = term.with_filters(term.carried_filters())
        query = exp.Select(expressions=[i.copy() for i in items])
        query.set("from_", exp.From(this=term.from_.copy()))
        conditions = [c.copy() for c in term.guards + term.where]
        if term.joins:
            query.set("joins", [j.copy() for j in term.joins])
        if conditions:
            query.set("where", exp.Where(this=exp.and_(*conditions, copy=False)))
        return query

    def with_filters(self, filters: list[tuple[int | None, exp.Expr]]) -> Term:
        """This term with each filter added where it goes (``None``: WHERE, ``i``: the ON
        of join ``i``), as :meth:`key_filters` places them. A key filter ``t.y IN (...)`` on
        a derived table ``t`` is also pushed into ``t`` (:func:`push_key_filter`): the engine
        then groups only the rows of the keys wanted, not the whole table."""
        if not filters:
            return self  # (the copies below are for the filters' edits: none to make)
        from_ = self.from_.copy()
        joins = [j.copy() for j in self.joins]
        where = list(self.where)
        for place, condition in filters:
            if place is None:
                where.append(condition)
            else:
                on = joins[place].args.get("on")
                joins[place].set("on", exp.and_(on, condition) if on else condition)
            if uses_key_semijoins():
                for relation in [from_, *(j.this for j in joins)]:
                    push_key_filter(relation, condition)
        return replace(self, from_=from_, joins=tuple(joins), where=tuple(where))

    def semijoin_filters(self) -> list[tuple[int | None, exp.Expr]]:
        """For each equality ``d.x = t.y`` between the changed source ``d`` and another
        relation ``t`` of this term: ``t.y IN (SELECT x FROM <changes>)`` (see
        :meth:`key_filters`). Implied by the equality, so the result is the same; but it
        prunes the scan of ``t`` to the changed keys whatever join order the engine picks
        (an engine otherwise may join two big tables first and scan them whole).

        >>> from sqlglot import parse_one
        >>> term = Term(parse_one("SELECT * FROM d, t").args["from_"].this,
        ...     where=(parse_one("d.x = t.y AND t.z > 1 AND d.w < 0"),), delta_alias="d",
        ...     delta_rows=parse_one("SELECT * FROM changes"))
        >>> [(i, f.sql()) for i, f in term.semijoin_filters()]
        [(None, 't.y IN (SELECT x FROM (SELECT * FROM changes) AS _ivm_d WHERE _ivm_d.w < 0)')]
        >>> q = parse_one("SELECT * FROM d LEFT JOIN t ON d.x = t.y")
        >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]), delta_alias="d",
        ...     delta_rows=parse_one("SELECT * FROM changes"))
        >>> [(i, f.sql()) for i, f in term.semijoin_filters()]
        [(0, 't.y IN (SELECT x FROM (SELECT * FROM changes) AS _ivm_d)')]
        """
        if self.delta_alias is None or self.delta_rows is None:
            return []
        rows, alias = self.delta_rows, self.delta_alias
        has = row_columns(rows)
        # the changed rows that can pass the term's WHERE: a view's filter on the changed
        # source then prunes the other side to the keys that matter (TPC-H Q19: of 400
        # changed parts, the few of its brands and sizes; none often, and an empty key set
        # lets the engine skip the scan of lineitem). Rows of key columns only keep the
        # conditions on those columns.
        passing = [on_changes(c, alias) for w in self.where for c in conjuncts(w)]
        kept = [
            c
            for c in passing
            if c is not None and (has is None or {x.name for x in c.find_all(exp.Column)} <= has)
        ]

        def keys(column: str) -> exp.Select | None:
            if has is not None and column not in has:
                return None
            query = exp.select(exp.column(column)).from_(parenthesized(rows.copy(), "_ivm_d"))
            return query.where(*kept, copy=False) if kept else query

        return self.key_filters(self.delta_alias, keys)

    def range_filters(self) -> list[tuple[int | None, exp.Expr]]:
        """For each equality ``d.x = t.y`` between the changed leaf ``d`` and a source's
        state ``t`` of this term: ``t.y`` within the least and the greatest ``x`` of the
        changes (:class:`KeyRange`), placed as :meth:`key_filters` places a semi-join filter
        (transitively too). Implied by the equality: a row of ``t`` that joins a changed row
        has its ``y`` equal to that row's ``x``, within the range (a NULL ``x`` joins
        nothing). An engine that cannot push a semi-join into a table scan can push literal
        bounds, and skip the data files whose column bounds lie outside them (Spark + Iceberg:
        a table appended in key order keeps the new keys in the newest files).

        >>> from sqlglot import parse_one
        >>> def bounds(table, column):
        ...     return exp.Literal.number(3), exp.Literal.number(9)
        >>> q = parse_one("SELECT * FROM d, (SELECT * FROM s) AS t WHERE d.x = t.y AND d.w = t.z")
        >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]), (q.args["where"].this,),
        ...     delta_alias="d", delta_range=lambda c: KeyRange(bounds) if c == "x" else None)
        >>> [(i, f.sql()) for i, f in term.range_filters()]
        [(None, 't.y BETWEEN COALESCE(3, t.y) AND COALESCE(9, t.y)')]
        """
        if self.delta_alias is None or self.delta_range is None:
            return []
        return self.key_filters(self.delta_alias, self.delta_range)

    def carried_filters(self) -> list[tuple[int | None, exp.Expr]]:
        """Each WHERE conjunct ``t.y IN (<keys>)`` that is a key filter (:func:`key_in`),
        carried to the relations equal to ``t.y`` (:meth:`key_filters`), but not onto columns
        that have an ``IN`` filter already. A term built with a key filter on one relation
        (an unmatched-row term of an outer join: ``J.a IN (SELECT b FROM ΔR)``) thus prunes
        the others joined by the same key, as the delta's semi-join filters do; without it
        an engine groups a subquery joined to ``J.a`` whole (TPC-H Q21). On engines that
        want key semi-joins (:func:`uses_key_semijoins`) only.

        >>> from sqlglot import parse_one
        >>> q = parse_one("SELECT * FROM l LEFT JOIN s ON l.k = s.k")
        >>> keys = key_in(parse_one("l.k"), parse_one("SELECT 1"))
        >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]), (keys,))
        >>> [(i, f.sql()) for i, f in term.carried_filters()]
        [(0, 's.k IN (SELECT 1)')]
        >>> own = parse_one("l.k IN (SELECT 1)")  # a view's own IN: may read a whole table
        >>> Term(q.args["from_"].this, tuple(q.args["joins"]), (own,)).carried_filters()
        []
        """
        if not uses_key_semijoins():
            return []
        filtered = set()
        carriers = []
        in_where = [(c, True) for w in self.where for c in conjuncts(w)]
        in_on = [(c, False) for j in self.joins for c in conjuncts(j.args.get("on"))]
        for condition, where in in_where + in_on:
            column = condition.this if isinstance(condition, exp.In) else None
            query = condition.args.get("query") if column is not None else None
            if not (isinstance(column, exp.Column) and column.table and query is not None):
                continue
            filtered.add((column.table, column.name))
            carried = where and condition.meta.get(KEY_FILTER) and isinstance(query, exp.Subquery)
            if carried and uncorrelated(query.this):
                carriers.append((column, query.this))
        filters: list[tuple[int | None, exp.Expr]] = []
        for column, query in carriers:
            found = self.key_filters(column.table, only_column(column.name, query), filtered)
            filters += found
            filtered.update(
                (f.this.table, f.this.name) for _, f in found if isinstance(f.this, exp.Column)
            )
        return filters

    def aliases(self) -> list[str]:
        """The relations' aliases, in FROM order."""
        return [self.from_.alias_or_name] + [j.this.alias_or_name for j in self.joins]

    def null_extended(self) -> set[str]:
        """The aliases of the relations an outer join of this term may NULL-extend."""
        names = self.aliases()
        nullable: set[str] = set()
        for i, join in enumerate(self.joins):
            side = (join.side or "").upper()
            if side in ("RIGHT", "FULL"):
                nullable.update(names[: i + 1])
            if side in ("LEFT", "FULL"):
                nullable.add(names[i + 1])
        return nullable

    def key_filters(
        self,
        alias: str,
        keys: Callable[[str], exp.Query | KeyRange | None],
        filtered: set[tuple[str, str]] | None = None,
    ) -> list[tuple[int | None, exp.Expr]]:
        """For each equality ``a.x = t.y`` (a WHERE or ON conjunct) between the relation
        ``a`` (``alias``) and another relation ``t`` of this term, where ``keys(x)`` is a
        query of the values ``a.x`` can have in the rows the term keeps: ``t.y IN
        (keys(x))``, and where it goes (``None``: WHERE, ``i``: the ON of join ``i``).
        Implied by the equality for those rows (a NULL ``a.x`` has no partner anyway).
        ``keys(x)`` may instead be a :class:`KeyRange` of those values: ``t.y`` within it,
        where ``t`` is a source's state the range applies to (:meth:`KeyRange.on`).

        A filter goes where its equality is, which keeps it implied: into WHERE from WHERE,
        or from an inner join's ON when ``t`` is never NULL-extended in this term; else into
        that ON, if ``t`` is the null-supplying side of a LEFT or RIGHT join or the join is
        inner. Never onto a preserved side of an outer join: in the ON it would NULL-extend
        the rows it rejects instead of dropping them.

        Transitively too: a filter that went into WHERE holds for every row the term keeps,
        so ``t.y`` then carries the same keys to the relations equal to it (``t.y = u.z``:
        ``u.z IN (keys(x))``, placed by the same rules). TPC-H Q21 joins the changed orders
        to lineitem ``l1`` and ``l1`` to two subqueries grouped by order key: without the
        second hop both subqueries group all of lineitem. A filter placed in an ON carries
        nothing further (it holds only for the rows that join).

        >>> from sqlglot import parse_one
        >>> q = parse_one("SELECT * FROM d, l LEFT JOIN s ON l.k = s.k WHERE d.x = l.k")
        >>> term = Term(q.args["from_"].this, tuple(q.args["joins"]), tuple([q.args["where"].this]))
        >>> [(i, f.sql()) for i, f in term.key_filters("d", lambda c: parse_one("SELECT 1"))]
        [(None, 'l.k IN (SELECT 1)'), (1, 's.k IN (SELECT 1)')]
        """
        names = self.aliases()
        nullable = self.null_extended()
        places: list[tuple[int | None, exp.Expr]] = [
            (None, c) for w in self.where for c in conjuncts(w)
        ]
        places += [(i, c) for i, j in enumerate(self.joins) for c in conjuncts(j.args.get("on"))]
        filters: list[tuple[int | None, exp.Expr]] = []
        # (relation, column) given a filter; ``filtered``: those a carrier skips from the start
        skipped = set(filtered or ())
        relations = dict(zip(names, [self.from_, *(j.this for j in self.joins)], strict=True))
        Keys = Callable[[str], exp.Query | KeyRange | None]
        carriers: list[tuple[str, Keys, Keys | None]] = [(alias, keys, None)]
        while carriers:
            table, found_keys, through = carriers.pop(0)
            for place, eq in places:
                if not isinstance(eq, exp.EQ):
                    continue
                sides = [eq.this, eq.expression]
                if not all(isinstance(c, exp.Column) and c.table for c in sides):
                    continue
                for mine, other in (sides, sides[::-1]):
                    # never onto the changed relation: small already, and its own keys
                    if mine.table != table or other.table in (table, alias, self.delta_alias):
                        continue
                    if (table != alias or filtered is not None) and (
                        other.table,
                        other.name,
                    ) in skipped:
                        continue  # a hop adds nothing to a filter already there
                    query = found_keys(mine.name)
                    if query is None:
                        continue
                    if through is not None and is_state(relations.get(other.table)) is False:
                        query = through(mine.name) or query
                    target = place
                    if place is not None:
                        found = on_or_where(self.joins[place], place, other.table, names, nullable)
                        if found is False:
                            continue
                        target = found
                    if isinstance(query, KeyRange):
                        condition = query.on(other, relations.get(other.table))
                        if condition is None:
                            continue
                    else:
                        condition = key_in(other, query)
                    filters.append((target, condition))
                    skipped.add((other.table, other.name))
                    if target is None:
                        narrowed = (
                            self._through(relations.get(other.table), other.name, query, nullable)
                            if isinstance(query, exp.Query)
                            else None
                        )
                        carriers.append((other.table, only_column(other.name, query), narrowed))
        return filters

    def _through(
        self, relation: exp.Expr | None, column: str, keys: exp.Query, nullable: set[str]
    ) -> Callable[[str], exp.Query | None] | None:
        """The keys ``relation``'s ``column`` carries to a grouped derived table, narrowed
        by ``relation``'s own conditions (its WHERE conjuncts on it alone) when it is a
        source's state: ``SELECT t.column FROM <its state> AS t WHERE <them> AND t.column
        IN (keys)``. A derived table groups the rows of the keys it is given, so fewer keys
        save a pass over its input; a source's state is only pruned by them (TPC-H Q17: of
        the ~6,000 parts an append's lineitems name, four are of brand 23 in a medium box,
        and the average quantity over lineitem is computed for those). ``None`` otherwise.
        """
        if relation is None or relation.alias_or_name in nullable or not is_state(relation):
            return None
        table = relation.alias_or_name
        own = [implied_on(c, table) for w in self.where for c in conjuncts(w)]
        kept = [c for c in own if c is not None and c.find(exp.Query) is None]
        if not kept:
            return None
        key = exp.column(column, table=table)
        query = exp.select(key.copy()).from_(relation.copy())
        query = query.where(*kept, exp.In(this=key, query=exp.Paren(this=keys.copy())), copy=False)
        return lambda name: query.copy() if name == column else None


def union_all(queries: list[exp.Select]) -> exp.Query:
    """``q1 UNION ALL q2 ...``, adopting the queries (each caller builds them for it, so
    nothing is copied); an empty list is not allowed."""
    assert queries, "union of no queries"
    assert len({id(q) for q in queries}) == len(queries), "a query twice in one union"
    if len(queries) == 1:
        return queries[0]
    # one n-ary call: a pairwise fold copies the growing left side again at each step
    # (quadratic in the branches: a CUBE's 32 took seconds)
    return exp.union(*queries, distinct=False, copy=False)


@dataclass
class Context:
    """What operators need while generating SQL for one view."""

    engine: Engine
    features: set[str] = field(default_factory=set)
    counter: int = 0  # numbers the CTEs of nested operators
    # how many steps a UNION ALL recursion may take (``tree.recursive``); deeper fails
    max_recursion_depth: int = 1000
    # the CTEs read more than once (:mod:`duckstream.tree.shared_cte`): (mark, body) -> key
    shared_ctes: dict[tuple[str, str], str] = field(default_factory=dict)
    # their tables while the refresh's steps are generated (None: every reference inlines)
    shares: Shares | None = None
    # steps the sink runs before the statement of the delta it asked for (temporary tables
    # and run-time values that delta reads, :mod:`duckstream.tree.top_k`), while it collects
    # them; None: the operator inlines them instead (where the engine would compute a
    # temporary table again at each read: Spark's temporary views)
    steps_first: list[Step] | None = None


class Leaf(ABC):
    """Something that stands in a FROM clause under an alias: a source table or a subquery."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The leaf's alias in the FROM clause."""

    @abstractmethod
    def sources(self) -> list[Source]: ...

    @abstractmethod
    def state(self, ctx: Context, version: Version) -> exp.Expr:
        """An aliased relation: the leaf at ``version``."""

    @abstractmethod
    def delta(self, ctx: Context) -> tuple[exp.Expr, exp.Expr]:
        """An aliased relation of the leaf's changes, and the expression of their multiplicity."""

    def only_grows(self) -> bool:
        """Whether the leaf's delta has no negative row whenever its sources' changes have
        none (a window of appends only): :meth:`Relation.only_grows`. False unless the leaf
        knows better."""
        return False

    def delta_within(
        self, ctx: Context, wanted: dict[str, exp.Query]
    ) -> tuple[exp.Expr, exp.Expr] | None:
        """:meth:`delta`, but only its rows whose column ``c`` is among the values of
        ``wanted[c]`` (for some of the columns at least, NULLs left out), or ``None`` when the
        leaf computes no cheaper delta for them (see :mod:`duckstream.tree.demand`)."""
        return None

    def delta_rows(self, ctx: Context) -> exp.Expr | None:
        """A query of the leaf's changes cheap enough to read again (for semi-join filters),
        or ``None``. It may select only some columns, then with every value each of them
        takes in the changes (and perhaps more): a semi-join filter needs no more than the
        changed keys, one column at a time, and a superset of them keeps it implied."""
        return None

    def delta_range(self, ctx: Context) -> Callable[[str], KeyRange | None] | None:
        """The range of each of the leaf's columns in its changes (a run-time constant, for
        range filters: :meth:`Term.range_filters`), or ``None`` when neither the leaf nor its
        engine gives one."""
        return None

    def reads_changes_only(self, ctx: Context) -> bool:
        """Whether the leaf's delta reads nothing but one source's changes, cheap to read
        again (:meth:`Block.reads_changes_only`): a source's changes, or a derived table
        that projects and filters them."""
        return False


class Block(ABC):
    """An operator that produces terms (join, filter): an open SELECT block."""

    @abstractmethod
    def sources(self) -> list[Source]: ...

    @abstractmethod
    def state_terms(self, ctx: Context, version: Version) -> list[Term]: ...

    @abstractmethod
    def delta_terms(self, ctx: Context) -> list[Term]: ...

    def key_terms(self, ctx: Context, aliases: frozenset[str] | None) -> list[Term]:
        """Terms enough to find what a change touches: for every row the delta changes,
        some row of these terms agrees with it on the columns of the relations ``aliases``
        (``None``: on every column). The delta terms themselves unless an operator knows
        cheaper ones."""
        return self.delta_terms(ctx)

    def only_grows(self) -> bool:
        """Whether the block's delta terms have no negative row whenever its sources'
        changes have none: :meth:`Relation.only_grows`. False unless the block knows
        better."""
        return False

    def reads_changes_only(self, ctx: Context) -> bool:
        """Whether the delta terms read nothing but one source's changes, and those are
        cheap to read again (a materialized copy): one scan, filtered perhaps."""
        return False

    def changed_rows(self, ctx: Context) -> tuple[str, exp.Expr] | None:
        """When every row of the delta terms is a row of one relation's delta (one leaf,
        filtered perhaps): that leaf's alias and its cheap rows (:meth:`Leaf.delta_rows`,
        whose columns then hold every value the delta's rows take); else ``None``."""
        return None


def column_tables(expressions: Iterable[exp.Expr]) -> frozenset[str] | None:
    """The relations the expressions' columns name, or ``None`` when a column is not
    qualified or an expression holds a subquery (then which relations it reads is unknown).

    >>> from sqlglot import parse_one
    >>> sorted(column_tables([parse_one("c.k + 1"), parse_one("o.x IS NULL")]))
    ['c', 'o']
    >>> column_tables([parse_one("k")]) is None
    True
    """
    found: set[str] = set()
    for expression in expressions:
        if expression.find(exp.Query):
            return None
        for column in expression.find_all(exp.Column):
            if not column.table:
                return None
            found.add(column.table)
    return frozenset(found)


class Relation(ABC):
    """An operator that produces a query with named columns (project, aggregate)."""

    @abstractmethod
    def sources(self) -> list[Source]: ...

    @abstractmethod
    def columns(self) -> list[str]: ...

    @abstractmethod
    def state(self, ctx: Context, version: Version) -> exp.Query:
        """The relation at ``version``."""

    @abstractmethod
    def delta(self, ctx: Context) -> exp.Query:
        """The relation's changes: its columns plus ``_ivm_mult``, not netted."""

    def only_grows(self) -> bool:
        """Whether the relation's delta has no negative row whenever its sources' changes
        have none: a window of appends only then only adds rows to it, and a view over it
        can apply the delta with a plain INSERT. True for the monotone operators (scan,
        filter, projection, inner join, UNION ALL) over monotone inputs; an aggregate,
        DISTINCT, outer join, EXCEPT, INTERSECT or window function can remove or replace a
        row on an append (a group's row is replaced, a NULL-extended row loses its place).
        False unless the operator knows better: a wrong False only costs speed."""
        return False

    def delta_within(self, ctx: Context, wanted: dict[str, exp.Query]) -> exp.Query | None:
        """:meth:`delta` restricted to the rows whose column ``c`` is among the values of
        ``wanted[c]`` (for some of the columns at least; NULLs left out), or ``None`` when
        the relation has no cheaper delta for them (:meth:`Leaf.delta_within`)."""
        return None

    def delta_keys(self, ctx: Context) -> exp.Query | None:
        """A cheap query of some of the relation's columns holding every value each takes in
        :meth:`delta`'s rows (a superset allowed), or ``None``: what :meth:`Leaf.delta_rows`
        of a derived table over it offers for semi-join filters."""
        return None

    def reads_changes_only(self, ctx: Context) -> bool:
        """Whether :meth:`delta` reads nothing but one source's changes, cheap to read
        again (:meth:`Block.reads_changes_only`), through projections and filters only."""
        return False


# An operator, a leaf or a relation of the tree.
Node = Leaf | Block | Relation


def moves_with_clock(node: Node) -> bool:
    """Whether ``node`` holds a temporal filter (:mod:`duckstream.tree.temporal_filter`):
    the clock is one of its sources, and its rows change when the clock moves even where no
    table changed (a date spine of constants up to ``current_date``). Walks the operators'
    fields, so that every operator need not say it."""
    seen: set[int] = set()

    def holds(value: object) -> bool:
        if id(value) in seen:
            return False
        seen.add(id(value))
        if getattr(value, "reads_moving_clock", False):
            return True
        if isinstance(value, list | tuple):
            return any(holds(v) for v in value)
        if isinstance(value, Leaf | Block | Relation) and is_dataclass(value):
            return any(holds(getattr(value, f.name)) for f in fields(value))
        return False

    return holds(node)


def changes(node: Node) -> bool:
    """Whether ``node`` can change between two refreshes: it reads a table or the clock (a
    constant relation never changes, so operators leave its delta terms out)."""
    return bool(node.sources()) or moves_with_clock(node)


def changed_flag(ctx: Context, nodes: Iterable[Node]) -> exp.Expr:
    """A guard, constant during one refresh: did something ``nodes`` read change in the
    window? A source (each engine's flag also holds when the clock of a temporal filter
    moved), or, for nodes that read no table, the clock of their temporal filters. FALSE for
    constants.

    >>> from duckstream.tree.constant import ConstantRelation
    >>> from sqlglot import parse_one
    >>> changed_flag(None, [ConstantRelation(parse_one("SELECT 1 AS x"))]).sql()
    'FALSE'
    """
    nodes = list(nodes)
    flags = [ctx.engine.changed(s) for node in nodes for s in node.sources()]
    if not flags and any(moves_with_clock(node) for node in nodes):
        flags.append(ctx.engine.clock_moved())
    return exp.paren(exp.or_(*flags)) if flags else exp.false()


def mult_column(alias: str) -> exp.Column:
    return exp.column(MULT, table=alias)
