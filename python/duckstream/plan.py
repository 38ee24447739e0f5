"""The compiled result: the steps that create, maintain and read a materialized view.

A plan is data. Each protocol step (``create_cursors_table``, ``create_mv``,
``initialize_cursors``, ``maintain``, ``query_mv``) is a list of typed steps (:data:`Step`)
that an engine's runner executes; the engine also renders each step as plain SQL, and the
plan keeps that rendering in the fields of the same names: statements a person (or any SQL
client) runs one by one. On DuckDB they do exactly what the runner does; the runner may take
a faster path for the same step (DuckLake pins the window in Python: :class:`PinWindow`).

>>> temp = CreateTemp(exp.to_table("d"), exp.select("1"))
>>> steps = [Begin(), Sql("DELETE FROM t"), temp, Commit()]
>>> [type(s).__name__ for s in with_cleanup(steps, lambda t: Cleanup(f"DROP TABLE {t.name}"))]
['Begin', 'Sql', 'CreateTemp', 'Commit', 'Cleanup']
>>> index_of(steps, Commit)
3
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp


@dataclass(frozen=True)
class Sql:
    """One plain statement, as the engine rendered it. ``creates``: the temporary object it
    makes (dropped by the plan's clean-up). ``needed``: a query of one boolean, cheap next to
    the statement, that is false only when the statement would change nothing (a DELETE of
    the view's rows matched by a change table's negative rows, when it has none): a runner
    may read it first and skip the statement; as plain SQL the statement runs, a no-op then.
    ``snapshot_only``: the statement only makes sure the commit makes a snapshot (DuckLake
    makes none when nothing changed); a runner may skip it once an earlier statement of the
    transaction wrote rows to a DuckLake table."""

    statement: str
    creates: exp.Table | None = None
    needed: str | None = None
    snapshot_only: bool = False


@dataclass(frozen=True)
class Begin:
    """Open the step's transaction (nothing on an engine without transactions)."""


@dataclass(frozen=True)
class Commit:
    """Commit the step's transaction (nothing on an engine without transactions).

    ``view``: the view (catalog, schema, name) whose table and cursors the transaction
    writes, when it does: a runner may add what keeps two refreshes of one view, in two
    processes, from both committing the same window."""

    view: tuple[str, str, str] | None = None


@dataclass(frozen=True, eq=False)
class CreateTemp:
    """Materialize ``query`` as the temporary ``table`` (dropped by the clean-up); the engine
    renders both. Compared and hashed by identity, so an engine can cache its rendering:
    rendering a big query costs milliseconds, which a refresh must not pay every time.
    ``changes_of``: the source (full name) whose netted changes in the window the table holds,
    when it is such a copy (columns the view reads plus ``_ivm_mult``, rows netting to zero
    left out): a runner may count them before it goes on (:class:`Applied`).
    ``appends_only``: the same table's query for a window in which the source has no
    deletions (its inserted rows alone: nothing to net); a runner that pinned the window
    may run it instead."""

    table: exp.Table
    query: exp.Expr
    changes_of: str | None = None
    # the same table when the pinned window shows the source without deletions (appends
    # only): a simpler query, cheaper to plan; a runner that knows the window may run it
    appends_only: exp.Expr | None = None


@dataclass(frozen=True, eq=False)
class Iterate:
    """Evaluate a recursive relation by iteration, for an engine without ``WITH RECURSIVE``:
    the temporary ``table`` (``columns``) holds ``base``'s rows and every row ``step`` derives
    from the rows the iteration before added, ``step`` reading those as the table
    ``previous``. Under ``distinct`` (UNION) an iteration keeps only rows not found before.
    The loop stops at the first iteration that adds no row; one that still adds rows after
    ``bound`` iterations fails with ``message``. The engine renders the statements of one
    iteration and the loop's rule; its runner runs the loop. Compared by identity."""

    table: exp.Table
    columns: tuple[str, ...]
    base: exp.Expr
    step: exp.Expr
    previous: str
    distinct: bool
    bound: int
    message: str


@dataclass(frozen=True)
class PinSnapshot:
    """Pin the snapshots a build reads and the run-time values that follow from them (one
    statement; on Spark a one-row query whose columns are the values). ``spec``: what a
    runner needs to pin the same snapshots another way (Spark: from table metadata), or
    None."""

    statement: str
    spec: Any = None


@dataclass(frozen=True)
class PinWindow:
    """Pin the refresh window: end snapshots, cursors, what changed; fail with ``duckstream:
    rebuild required: ...`` when the window cannot be maintained. ``spec``: the engine's
    description of it (DuckLake: :class:`duckstream.engines.ducklake.window.WindowSpec`)."""

    spec: Any


@dataclass(frozen=True)
class Applied:
    """In ``maintain``: the window's changes are applied; the steps after it advance the
    cursors. Renders to nothing. A runner that finds every change copy
    (:attr:`CreateTemp.changes_of`) empty may skip from the copies to here: changes that net
    to nothing in the columns the view reads (an update of a column it does not read) leave
    the view as it is."""


@dataclass(frozen=True)
class SetValues:
    """Run a one-row query; each column is a run-time value named by its alias (Spark).
    ``spec``: what a runner needs to compute the same values another way (Spark's key
    ranges: from table metadata), or None."""

    query: str
    spec: Any = None


@dataclass(frozen=True)
class StopUnless:
    """Stop here (skipping to the clean-up) unless the run-time ``value`` (its ``field``,
    when given: the value is a struct) is true. ``about_old_table``: the value was read
    about the view's table as committed before the step's transaction; a runner that
    creates or replaces that table inside the transaction goes on past this step instead
    (the value describes a table that is gone)."""

    value: str
    field: str | None = None
    about_old_table: bool = False


@dataclass(frozen=True)
class Measure:
    """Run ``statement`` (the cursors' commit message) with the run-time ``variable`` it reads
    set to how long the path has run so far (a JSON measurement the cursors' commit carries:
    :class:`duckstream.strategy.Measured`). A clock is the runner's: as plain SQL the variable
    is set to NULL first, and the commit records no measurement; a runner writes its
    measurement into the statement, in place of the variable (one statement, not two)."""

    variable: str
    statement: str
    # the sources (full names) whose rows a runner may count into the measurement: DuckLake
    # on a catalog other processes commit to (:class:`duckstream.history.Entry`'s
    # ``source_rows``)
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitWith:
    """Run ``statement`` so that its commit carries ``properties`` (Iceberg snapshot
    properties: the view's cursors, committed with its data). ``appends_only``: a statement
    a runner may run instead when every changed source's window holds appends only (a view
    that then only grows: an INSERT, where ``statement`` is a MERGE); it fails, writing
    nothing, if the change would remove a row after all, and ``statement`` is run then."""

    statement: str
    properties: tuple[tuple[str, str], ...]
    appends_only: str | None = None


@dataclass(frozen=True)
class Cleanup:
    """Clean-up (drop a temporary object): runs last, also after a failure; once the work is
    committed, its failure is a warning, never an error."""

    statement: str


Step = (Sql | Begin | Commit | CreateTemp | PinSnapshot | PinWindow | SetValues | StopUnless) | (
    Applied | Measure | CommitWith | Cleanup | Iterate
)


def with_cleanup(steps: Sequence[Step], drop: Callable[[exp.Table], Step]) -> list[Step]:
    """``steps`` followed by the clean-up of every temporary object they create."""
    tables: dict[exp.Table, None] = {}  # in order, each once (tables compare by content)
    for step in steps:
        if isinstance(step, CreateTemp | Iterate):
            tables[step.table] = None
        elif isinstance(step, Sql) and step.creates is not None:
            tables[step.creates] = None
    return [*steps, *(drop(t) for t in tables)]


def index_of(steps: Sequence[Step], kind: type) -> int:
    """The position of the first step of type ``kind`` (``ValueError`` when none)."""
    for i, step in enumerate(steps):
        if isinstance(step, kind):
            return i
    raise ValueError(f"no {kind.__name__} step in the plan")


@dataclass(frozen=True)
class Naming:
    """Names of the tables and hidden columns duckstream creates.

    Every hidden column starts with ``_ivm_``; views may not use that prefix themselves.
    """

    mv_name: str = "mv"
    cursors_name: str = "_ivm_cursors"

    def mv_table(self) -> str:
        return self.mv_name

    def cursors_table(self) -> str:
        return self.cursors_name

    @staticmethod
    def aux_column(purpose: str) -> str:
        return f"_ivm_{purpose}"


@dataclass(frozen=True)
class PlanSource:
    """One table the view reads, as the view names it: ``alias`` where it has one (a table
    read twice, e.g. a self-join, is listed once per alias)."""

    catalog: str
    schema: str
    table: str
    alias: str | None = None

    @property
    def fqn(self) -> str:
        return f"{self.catalog}.{self.schema}.{self.table}"


@dataclass(frozen=True)
class Read:
    """One scan of the source ``table`` (full name) by a refresh (:mod:`duckstream.scans`).
    In ``maintain`` it runs when every clause of ``when`` holds, a clause holding when any
    source it names changed in the window (no clause: whenever the refresh runs); ``whole``:
    aggregated before anything restricts it to the changes, so it reads the whole table."""

    table: str
    when: tuple[frozenset[str], ...] = ()
    whole: bool = False

    def runs(self, changed: Collection[str]) -> bool:
        return all(not clause.isdisjoint(changed) for clause in self.when)

    def enabled_by(self, changed: Collection[str]) -> frozenset[str]:
        """The changed sources its clauses name (the changes it reads for)."""
        return frozenset(s for clause in self.when for s in clause if s in changed)


PROTOCOL = ("create_cursors_table", "create_mv", "initialize_cursors", "maintain", "query_mv")


@dataclass
class IVMPlan:
    """Everything needed to keep one materialized view current.

    Protocol: run ``create_cursors_table``, ``create_mv`` and ``initialize_cursors`` once;
    then run ``maintain`` (in order, on one connection) after any number of committed
    source changes. ``query_mv`` returns the view's rows without hidden columns.
    ``maintain`` is one transaction: it pins one end snapshot per catalog, applies the
    changes up to it and advances the cursors, or changes nothing.

    ``steps`` holds the same protocol as data (:data:`Step` lists, by protocol step), which
    the runners execute; the string fields are its rendering in the plan's dialect.
    """

    view_sql: str
    create_cursors_table: str
    create_mv: str
    initialize_cursors: list[str]
    maintain: list[str]
    query_mv: str
    sources: list[PlanSource] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    mv_table: str = ""
    cursors_table: str = ""
    output_columns: list[str] = field(default_factory=list)
    dialect: str = "duckdb"
    steps: dict[str, list[Step]] = field(default_factory=dict)
    # The scans of sources by ``maintain`` and by a rebuild (``initialize_cursors``), for the
    # cost model of ``strategy='auto'`` (:mod:`duckstream.scans`); None: not known.
    maintain_reads: list[Read] | None = None
    rebuild_reads: list[Read] | None = None

    @property
    def tables(self) -> list[str]:
        """The full names of the tables the view reads, each once, in order."""
        return list(dict.fromkeys(s.fqn for s in self.sources))

    def statements(self) -> dict[str, list[str]]:
        """The plan's SQL grouped by protocol step, for printing."""
        return {
            "create_cursors_table": [self.create_cursors_table],
            "create_mv": [self.create_mv],
            "initialize_cursors": list(self.initialize_cursors),
            "maintain": list(self.maintain),
            "query_mv": [self.query_mv],
        }
