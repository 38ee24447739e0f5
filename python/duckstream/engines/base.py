"""The small interface every engine implements.

The operator tree asks an engine for relations (a source's state at a version, a source's
changes in the refresh window), for run-time values (cursor and end snapshots, whether a
source changed) and for the statements around them (pin the window, check it, advance the
cursors). It never sees engine syntax itself.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from duckstream.errors import UnsupportedSQLError
from duckstream.plan import CreateTemp, Sql, Step


class Version(enum.Enum):
    """Which state of a source a relation reads."""

    OLD = "old"  # at the cursor: what the materialized view reflects now
    NEW = "new"  # at the pinned end snapshot of this refresh
    CURRENT = "current"  # no time travel (used to create empty tables with the right types)


@dataclass(frozen=True)
class Source:
    """One base table the view reads; ``index`` numbers it within the view."""

    catalog: str
    schema: str
    name: str
    index: int
    columns: frozenset[str] | None = None  # the columns the view reads; None: unknown

    @property
    def fqn(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name}"

    def table(self) -> exp.Table:
        return exp.table_(self.name, db=self.schema, catalog=self.catalog)


@dataclass(frozen=True)
class Target:
    """The materialized view and its cursors table."""

    catalog: str
    schema: str
    name: str
    cursors: str

    @property
    def fqn(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.name}"

    def table(self) -> exp.Table:
        return exp.table_(self.name, db=self.schema, catalog=self.catalog)

    @property
    def cursors_fqn(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.cursors}"

    def cursors_table(self) -> exp.Table:
        return exp.table_(self.cursors, db=self.schema, catalog=self.catalog)


MULT = "_ivm_mult"


class Engine(ABC):
    """SQL that depends on the engine and its table format."""

    dialect: str
    # Whether ``GROUP BY ROLLUP`` / ``CUBE`` / ``GROUPING SETS`` with the empty set gives the
    # grand-total row over no rows, as SQL says (DuckDB); Spark gives none (its grouping sets
    # are a grouped aggregate over an Expand).
    grand_total_over_no_rows: bool = True

    def __init__(self) -> None:
        self.target: Target | None = None
        self.sources: list[Source] = []

    def bind(self, target: Target, sources: list[Source]) -> None:
        """Fix the view this engine generates SQL for."""
        self.target = target
        self.sources = sources

    @property
    def tgt(self) -> Target:
        assert self.target is not None, "engine not bound to a view"
        return self.target

    # -- relations -------------------------------------------------------------------------
    @abstractmethod
    def state(self, source: Source, version: Version) -> exp.Expr:
        """A query reading every column of ``source`` at ``version``."""

    @abstractmethod
    def changes(self, source: Source) -> exp.Expr:
        """A query of the source's changes in the window: its columns plus ``_ivm_mult``
        (+1 inserted, -1 deleted; an update is both; not netted)."""

    # True when :meth:`changes` reads a table that :meth:`prepare_changes` filled: reading it
    # again costs little, so delta terms may add semi-join filters on it.
    changes_are_materialized = False
    # True when restrictions to keys are better spelled as uncorrelated semi-joins, also
    # pushed into derived tables grouped by the key
    # (:func:`duckstream.tree.key_filters.key_semijoins`)
    key_semijoins = False
    # whether the engine evaluates WITH RECURSIVE (``tree.recursive``), and how (``explain``)
    recursive_ctes = True
    recursion = "evaluated by the engine's own WITH RECURSIVE"
    # True when a CTE read more than once has its delta and states computed once per refresh
    # into temporary tables (:mod:`duckstream.tree.shared_cte`); else each reference inlines.
    shares_ctes = False
    # True when a rebuild fills the table from the view's query as the user wrote it (its
    # subqueries kept, :func:`duckstream.normalize.normalize_forms`) wherever the hidden
    # columns can be computed over it, rather than from the operator tree's decorrelated
    # form: the engine plans it as it plans a recomputation (DuckDB: an EXISTS becomes a
    # semi-join, not a join to a DISTINCT of the whole subquery). On Spark the fill stays as
    # it was, measured there.
    fill_from_view = False

    # True when :meth:`key_range` gives the bounds of a source's changed keys, for filters
    # on the states the changes join (:meth:`duckstream.tree.base.Term.range_filters`).
    key_ranges = False

    def key_range(
        self, source: Source, column: str, target: exp.Table, target_column: str
    ) -> tuple[exp.Expr, exp.Expr] | None:
        """The least and the greatest ``column`` of ``source``'s changes in the window, as
        run-time values (NULL: no bound), for a filter on ``target_column`` of the source
        ``target``'s state, which the changed rows join by ``column = target_column``;
        ``None``: no such filter. An engine that cannot push a semi-join into a table scan
        can push these literal bounds (Spark + Iceberg). None by default: DuckDB prunes its
        scans with the join's own run-time filters."""
        return None

    def prepare_changes(self) -> list[Step]:
        """Statements run after :meth:`pin_window` that :meth:`changes` may read from (e.g.
        each changed source's window copied once into a temporary table)."""
        return []

    @abstractmethod
    def changed(self, source: Source) -> exp.Expr:
        """A boolean, constant during one refresh: did ``source`` change in the window? (Or,
        in a view with temporal filters, did the clock move: the rows of a source that
        crossed a boundary are changes of any operator above it.) A guard: true when
        nothing changed costs a read, never a wrong row."""

    @abstractmethod
    def any_changed(self) -> exp.Expr:
        """A boolean, constant during one refresh: did any source change?"""

    # -- the clock (normalize.pin_clock) ---------------------------------------------------
    # The kinds of clock value the view reads (``current_date``...): in temporal filters
    # (maintained as the clock moves: tree.temporal_filter) and elsewhere (a move rebuilds).
    clock_filters: frozenset[str] = frozenset()
    clock_rebuilds: frozenset[str] = frozenset()

    def read_clock(self, filters: frozenset[str], rebuilds: frozenset[str]) -> None:
        """Make the refreshes of the bound view read the clock, once each, and record it with
        the cursors: the view reads the clock values ``filters`` in temporal filters and
        ``rebuilds`` elsewhere (a refresh whose ``rebuilds`` moved since the last one
        rebuilds the view, and says why)."""
        if filters or rebuilds:
            raise UnsupportedSQLError(
                "time", f"the {self.dialect} engine does not read the clock (current_date, now())"
            )

    def clock(self, version: Version, kind: str) -> exp.Expr:
        """The clock value ``kind`` (``current_date``, ``current_timestamp``,
        ``localtimestamp``: normalize.pin_clock) of ``version``: the refresh's (NEW, CURRENT)
        or the one the view was last refreshed at (OLD): a run-time constant."""
        raise UnsupportedSQLError("time", f"the {self.dialect} engine does not read the clock")

    def clock_moved(self) -> exp.Expr:
        """A boolean, constant during one refresh: did a clock value of the view's temporal
        filters move since the last refresh?"""
        raise UnsupportedSQLError("time", f"the {self.dialect} engine does not read the clock")

    @abstractmethod
    def runtime_value(self, name: str) -> exp.Expr:
        """A scalar computed earlier in the same refresh by :meth:`set_runtime_value`."""

    @abstractmethod
    def set_runtime_value(self, name: str, query: exp.Expr) -> Step:
        """A step storing the single value of ``query`` for :meth:`runtime_value`."""

    # -- statements ------------------------------------------------------------------------
    def sql(self, expression: exp.Expr) -> str:
        """``expression`` as this engine's SQL (its dialect quotes the names that need it)."""
        return expression.sql(dialect=self.dialect)

    def statement(self, expression: exp.Expr) -> Step:
        """A step running the statement ``expression`` (built by a sink or an engine)."""
        return Sql(self.sql(expression))

    def pretty(self, statement: str) -> str:
        """``statement`` reformatted for reading (parsed and rendered again in this engine's
        dialect); unchanged when sqlglot does not understand it."""
        try:
            (parsed,) = sqlglot.parse(statement, read=self.dialect)
        except (SqlglotError, ValueError):
            return statement
        if parsed is None or isinstance(parsed, exp.Command):
            return statement  # not understood by sqlglot: keep it exactly
        return parsed.sql(dialect=self.dialect, pretty=True)

    @abstractmethod
    def create_cursors_table(self) -> str: ...

    @abstractmethod
    def render(self, step: Step) -> list[str]:
        """``step`` as plain statements of this engine's SQL, for people and SQL clients."""

    @abstractmethod
    def drop(self, table: exp.Table) -> Step:
        """The clean-up step of the temporary ``table``."""

    @abstractmethod
    def pin_for_initialize(self) -> list[Step]:
        """Pin one snapshot per catalog and record it; NEW then reads at that snapshot."""

    @abstractmethod
    def record_cursors(self) -> list[Step]:
        """Replace this view's cursor rows with the pinned snapshots (after populating)."""

    @abstractmethod
    def pin_window(self) -> list[Step]:
        """Pin the refresh window, read the cursors, check them, decide what changed."""

    @abstractmethod
    def advance_cursors(self) -> list[Step]: ...

    def populate(self, inserts: list[exp.Insert]) -> list[Step]:
        """Steps that make the view's table hold exactly the rows the sink's ``inserts``
        (``INSERT INTO <view table> ...``) add, at the pinned snapshots: empty it, then
        insert. An engine without transactions overrides this to make it one commit."""
        return [self.statement(exp.delete(self.tgt.table())), *map(self.statement, inserts)]

    def before_fill(self) -> list[Step]:
        """Steps before the transaction of a fill (``initialize_cursors``) that read the view's
        table as it stands, for :meth:`after_fill` to act on; a runner that replaces the table
        inside that transaction runs them after its COMMIT instead, where the new table is
        the one they read. None here."""
        return []

    def after_fill(self, inserts: list[exp.Insert]) -> list[Step]:
        """Steps after the COMMIT of a fill (``initialize_cursors``) whose ``inserts`` are the
        sink's, outside its transaction (a failure there is a warning: the fill is
        committed). None here."""
        return []

    def pin_types(self, select: exp.Select, schema: dict | None) -> exp.Select:
        """The normalized ``select`` with the casts this engine needs for a maintained value
        to keep the type (and so the rounding) of the recomputed one; the view's result is
        the same. Unchanged here."""
        return select

    def check_view(self, view: exp.Expr, select: exp.Select, schema: dict | None) -> None:
        """Raise :class:`~duckstream.errors.UnsupportedSQLError` for a construct this engine
        cannot maintain: in the ``view`` as written (where this engine's SQL means something
        the rewrites would not keep) or in the normalized ``select`` (``schema`` as in
        ``compile_ivm``)."""
        return None  # every construct the compiler accepts

    def raise_error(self, message: str) -> exp.Expr:
        """An expression that fails the query with ``message`` when evaluated."""
        return exp.Anonymous(this="error", expressions=[exp.Literal.string(message)])

    def create_temp(
        self, table: exp.Table, query: exp.Expr, changes_of: Source | None = None
    ) -> Step:
        """A step materializing ``query`` as the temporary ``table`` (the plan's clean-up
        drops it); ``changes_of``: the source whose netted changes it copies."""
        return CreateTemp(table, query, changes_of.fqn if changes_of is not None else None)

    @abstractmethod
    def temp_table(self, name: str) -> exp.Table:
        """The temporary table called ``name`` (where this engine keeps temporary tables)."""

    @abstractmethod
    def copies(self, mult: exp.Expr) -> exp.Expr:
        """A select-list expression that repeats its row ``mult`` times."""

    @abstractmethod
    def replace_rows(
        self,
        keys: list[str],
        removed: exp.Query,
        added: exp.Query,
        columns: list[str],
        *,
        removes: exp.Query | None = None,
        upsert: exp.Query | None = None,
        appends: exp.Query | None = None,
    ) -> list[Step]:
        """Steps that delete the view's rows whose ``keys`` (NULL-safe) are in
        ``removed`` and insert the rows of ``added`` (all ``columns``, in order): one atomic
        change of the materialized table, inside the refresh. ``removes``: a query over the
        refresh's own tables (not the view's) that has rows whenever ``removed`` may: an
        engine may skip the delete when it has none (:attr:`~duckstream.plan.Sql.needed`).
        ``upsert``, when given, says the same in one query an engine may use instead: one row
        per key of ``removed`` (``keys`` unique in it and in the view's table), its ``columns``
        and ``_ivm_keep``, true for the rows of ``added``; a row whose ``_ivm_keep`` is not
        true is removed. ``appends``, when given: ``added`` for a window in which every
        changed source has appends only, where the view's relation only grows
        (:meth:`~duckstream.tree.base.Relation.only_grows`) and ``removed`` is empty; it
        fails (``RaiseError``) on a change that would remove a row. An engine whose runner
        knows the window may insert it alone."""

    @abstractmethod
    def fresh_row_ids_base(self) -> exp.Expr:
        """A number such that base + 1 .. base + n are unused ``_ivm_row`` values."""

    def avg(self, total: exp.Expr, count: exp.Expr) -> exp.Expr:
        """AVG from its SUM and non-NULL COUNT, typed as the engine types AVG."""
        return exp.Div(
            this=exp.cast(total, exp.DataType.build("double")),
            expression=exp.Nullif(this=count, expression=exp.Literal.number(0)),
        )

    def slug(self) -> str:
        """A name for this view usable inside identifiers and variable names."""
        t = self.tgt
        return "".join(ch if ch.isalnum() else "_" for ch in f"{t.catalog}_{t.schema}_{t.name}")
