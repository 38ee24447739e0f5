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

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

from sqlglot import exp

from duckstream.engines.base import MULT, Engine, Source, Version

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")


def ident(name: str) -> exp.Identifier:
    """An identifier for a column name, quoted only when it has to be."""
    return exp.to_identifier(name, quoted=not _PLAIN.match(name))


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
    # The alias of the source whose changes this term reads, and a query of those changes,
    # when re-reading them is cheap: ``select`` then adds semi-join filters (see there).
    delta_alias: str | None = None
    delta_rows: exp.Expr | None = None

    def filtered(self, *predicates: exp.Expr) -> Term:
        return replace(self, where=self.where + tuple(p.copy() for p in predicates))

    def multiplicity(self) -> exp.Expr:
        """The signed count each row of this term stands for."""
        if self.mult is None:
            return exp.cast(exp.Literal.number(1), exp.DataType.build("bigint"))
        return self.mult.copy()

    def select(self, *items: exp.Expr) -> exp.Select:
        """``SELECT items FROM ... WHERE ...`` for this term."""
        query = exp.Select(expressions=[i.copy() for i in items])
        query.set("from_", exp.From(this=self.from_.copy()))
        if self.joins:
            query.set("joins", [j.copy() for j in self.joins])
        conditions = [c.copy() for c in self.guards + self.where] + self.semijoin_filters()
        if conditions:
            query.set("where", exp.Where(this=exp.and_(*conditions)))
        return query

    def semijoin_filters(self) -> list[exp.Expr]:
        """For each equality ``d.x = t.y`` between the changed source ``d`` and another
        relation ``t`` of this term (a WHERE or ON conjunct): ``t.y IN (SELECT x FROM
        <changes>)``. Implied by the join, so the result is the same; but it prunes the scan
        of ``t`` to the changed keys whatever join order the engine picks (DuckDB otherwise
        may join two big tables first and scan them whole).

        >>> from sqlglot import parse_one
        >>> term = Term(parse_one("SELECT * FROM d, t").args["from_"].this,
        ...     where=(parse_one("d.x = t.y AND t.z > 1"),), delta_alias="d",
        ...     delta_rows=parse_one("SELECT * FROM changes"))
        >>> [f.sql() for f in term.semijoin_filters()]
        ['t.y IN (SELECT x FROM (SELECT * FROM changes) AS _ivm_d)']
        """
        if self.delta_alias is None or self.delta_rows is None:
            return []
        conjuncts: list[exp.Expr] = []
        for condition in [*self.where, *(j.args.get("on") for j in self.joins)]:
            if isinstance(condition, exp.And):
                conjuncts.extend(condition.flatten())
            elif condition is not None:
                conjuncts.append(condition)
        filters = []
        for eq in conjuncts:
            if not isinstance(eq, exp.EQ):
                continue
            sides = [eq.this, eq.expression]
            if not all(isinstance(c, exp.Column) and c.table for c in sides):
                continue
            for mine, other in (sides, sides[::-1]):
                if mine.table == self.delta_alias and other.table != self.delta_alias:
                    keys = exp.select(exp.column(mine.name)).from_(
                        exp.paren(self.delta_rows.copy()).as_("_ivm_d")
                    )
                    filters.append(exp.In(this=other.copy(), query=exp.Subquery(this=keys)))
        return filters


def union_all(queries: list[exp.Select]) -> exp.Query:
    """``q1 UNION ALL q2 ...``; an empty list is not allowed."""
    assert queries, "union of no queries"
    result: exp.Query = queries[0]
    for query in queries[1:]:
        result = exp.union(result, query, distinct=False)
    return result


@dataclass
class Context:
    """What operators need while generating SQL for one view."""

    engine: Engine
    features: set[str] = field(default_factory=set)
    counter: int = 0  # numbers the CTEs of nested operators


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

    def delta_rows(self, ctx: Context) -> exp.Expr | None:
        """A query of the leaf's changes cheap enough to read again (for semi-join filters),
        or ``None``."""
        return None


class Block(ABC):
    """An operator that produces terms (join, filter): an open SELECT block."""

    @abstractmethod
    def sources(self) -> list[Source]: ...

    @abstractmethod
    def state_terms(self, ctx: Context, version: Version) -> list[Term]: ...

    @abstractmethod
    def delta_terms(self, ctx: Context) -> list[Term]: ...


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


def mult_column(alias: str) -> exp.Column:
    return exp.column(MULT, table=alias)


def aliased(query: exp.Expr, alias: exp.TableAlias | str) -> exp.Subquery:
    """``(query) AS alias``, keeping a column list if the user's alias had one."""
    table_alias = (
        alias.copy()
        if isinstance(alias, exp.TableAlias)
        else exp.TableAlias(this=exp.to_identifier(alias))
    )
    return exp.Subquery(this=query, alias=table_alias)
