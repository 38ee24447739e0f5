"""The DuckDB + DuckLake backend of the ``incremental_ivm`` materialization.

The decision (build, rebuild or maintain, and why), the state record and the log line are
the engine-independent core's (:mod:`dbt_duckstream`); this module does what only DuckLake
does, on the thread's DuckDB connection:

* **look**: in one read transaction, whether the table and its ``_ivm_state__<model>`` exist,
  the views of the catalogs (inlined into the model SQL, so a redefined view rebuilds);
* **refresh**: one transaction, one read of the change window
  (:func:`duckstream.engines.ducklake.runner.begin` pins it; ``auto`` estimates from it): no
  source changed
  -> roll back, nothing written; else apply the change feed, or rebuild in place (the
  estimate says it is cheaper, ``ivm_strategy='full'``, or the window cannot be maintained:
  a source recreated or altered, an expired cursor snapshot) -- the table and the state
  atomically with the cursors;
* **build**: create (or refill in place, same DuckLake table id, so models reading it keep
  maintaining incrementally) at a pinned snapshot, with the cursors and the state.

The cursors travel in the commits that build or refresh the table
(:mod:`duckstream.engines.ducklake.cursors`); each model keeps two small tables beside it:
``_ivm_cursors__<model>`` (an append-only log of its cursors, never read by duckstream) and
``_ivm_state__<model>`` (:class:`dbt_duckstream.model.State`). They are per model because
DuckLake refuses concurrent commits that modify one table, and dbt runs models in threads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt.adapters.duckstream.__version__ import version as VERSION
from dbt.adapters.duckstream.expand import (
    ViewKey,
    expand_views,
    name_outputs,
    views_by_key,
    views_named,
)
from dbt_duckstream import equivalence, plans
from dbt_duckstream.decide import Compiled, Found
from dbt_duckstream.materialize import Refreshed
from dbt_duckstream.materialize import materialize as materialize_with
from dbt_duckstream.model import ModelError, ModelRequest, State, plan_hash
from dbt_duckstream.outcome import Outcome
from dbt_duckstream.plans import PlanCache, StateCache
from duckstream.clock import at_clock
from duckstream.compiler import compile_ivm
from duckstream.connection import Connection, literal
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake import runner as ducklake_runner
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.runner import run_statements
from duckstream.engines.ducklake.schema import schema_of
from duckstream.errors import UnsupportedSQLError
from duckstream.normalize.pin_clock import pin_clock
from duckstream.plan import IVMPlan, Naming
from duckstream.strategy import Phase, RefreshReport

__all__ = [
    "DuckLakeBackend",
    "ModelError",
    "ModelRequest",
    "Outcome",
    "equivalence_sql",
    "materialize",
    "read_state",
]


def materialize(con: Connection, request: ModelRequest, plans: PlanCache | None = None) -> Outcome:
    """Build, rebuild or maintain the table of ``request`` (:mod:`dbt_duckstream.materialize`);
    ``plans``: where its compiled plan is kept between runs."""
    states = None if plans is None else StateCache(plans.directory.parent / "states")
    return materialize_with(DuckLakeBackend(con, states), request, plans)


def _run(con: Connection, statements: list[str], *, opened: bool = False) -> None:
    """The runner (looked up when called: tests replace ``run_statements`` here)."""
    run_statements(con, statements, opened=opened)


class Recording:
    """``con``, writing down every statement it executes (the SQL a model run ran), and
    counting the rows its ``INSERT``, ``DELETE`` and ``UPDATE`` statements of the table
    ``counted`` (lower-cased catalog, schema, name) report: the refresh's changes to the
    model's table, as DuckDB reports them (an update: a row deleted and one inserted, as
    DuckLake's change feed lists it), with no read of the table's change feed after the
    commit."""

    def __init__(self, con: Connection, executed: list[str]) -> None:
        self.con = con
        self.executed = executed
        self.counted: tuple[str, str, str] | None = None
        self.inserted = self.deleted = 0

    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any:
        self.executed.append(query)
        result = self.con.execute(query, *args, **kwargs)
        if self.counted is not None:
            written = _written(query)
            if written is not None and written[1] == self.counted:
                row = result.fetchone()  # the statement's row count
                rows = int(row[0]) if row else 0
                if written[0] != "DELETE":
                    self.inserted += rows
                if written[0] != "INSERT":
                    self.deleted += rows
                return Fetched(row)  # the runner reads the count too
        return result


class Fetched:
    """The result of a statement whose one row was fetched already, fetched again."""

    def __init__(self, row: Any) -> None:
        self.rows = [] if row is None else [row]

    def fetchone(self) -> Any:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[Any]:
        rows, self.rows = self.rows, []
        return rows


# The table a DML statement writes: INSERT INTO t, DELETE FROM t, UPDATE t.
_WRITE = re.compile(
    r'\s*(?P<kind>INSERT|DELETE|UPDATE)\s+(?:INTO\s+|FROM\s+)?(?P<table>(?:"[^"]*"|[^\s("])+)',
    re.IGNORECASE,
)


def _written(statement: str) -> tuple[str, tuple[str, str, str]] | None:
    """What ``statement`` does (INSERT, DELETE, UPDATE) to which table (lower-cased catalog,
    schema, name), if it writes one.

    >>> _written('INSERT INTO lake.main."Totals" (a) SELECT 1')
    ('INSERT', ('lake', 'main', 'totals'))
    >>> _written("DELETE FROM lake.main.t AS x WHERE true"), _written("SELECT 1")
    (('DELETE', ('lake', 'main', 't')), None)
    """
    found = _WRITE.match(statement)
    if found is None:
        return None
    kind, name = found.group("kind"), found.group("table")
    try:
        table = exp.to_table(name, dialect="duckdb")
    except SqlglotError:
        return None
    return kind.upper(), (table.catalog.lower(), table.db.lower(), table.name.lower())


class DuckLakeBackend:
    """The :class:`dbt_duckstream.materialize.Backend` of a DuckDB connection with the model's
    DuckLake catalog attached."""

    dialect = "duckdb"
    version = VERSION

    def __init__(self, con: Connection, states: StateCache | None = None) -> None:
        self.con = con
        self.states = states  # where the states read are kept between runs (None: read)
        self.executed: list[str] = []
        self.recording = Recording(con, self.executed)
        self.views: dict[ViewKey, str] = {}
        self.engine_phases: list[Phase] = []
        self.read: tuple[list[TableKey], CatalogRead] = ([], CatalogRead(None, True, set(), {}, []))
        self.request: ModelRequest | None = None  # the model look() was asked about
        self.shared = True  # whether other processes commit to its catalog (look() reads it)
        self.report: RefreshReport | None = None  # what the last refresh did
        self.expanded = ""  # the view SQL compile_args() made last, its views inlined

    def look(self, request: ModelRequest, plan: object | None = None) -> Found:
        """In one read transaction: the catalog (is the model's database a DuckLake, do its
        table and state exist, the views, the columns of the tables ``plan`` reads: what
        :meth:`plan_depends` asks) in one query, then the state."""
        sources = _sources(plan) if isinstance(plan, IVMPlan) else []
        with _reading(self.con):
            read = _catalog(self.con, request, sources=sources)
            _require_ducklake(request, read.kind)
            names = read.tables
            state = self._state(request) if request.state_name in names else None
        self.views, self.read, self.request = read.views, (sources, read), request
        self.shared = read.shared
        return Found(table=request.identifier in names, state=state)

    def _state(self, request: ModelRequest) -> State | None:
        """The model's state: kept in :attr:`states` under its table's uuid (a state table is
        only ever replaced, so a uuid names one state), else read from the table."""
        version = _state_version(self.con, request) if self.states is not None else None
        if self.states is not None and version is not None:
            found = self.states.load(request, version)
            if found is not None:
                return found
        state = _read_state(self.con, request)
        if self.states is not None and version is not None and state is not None:
            self.states.store(request, version, state)
        return state

    def _written(self, request: ModelRequest, state: State) -> None:
        """Keep ``state``, just committed, in :attr:`states` under its new table's uuid: the
        next run reads ~1 ms of catalog metadata, not the record (~25 ms CPU after the
        commits of a dbt run). Not when the catalog is shared with other processes (a
        PostgreSQL catalog): another process may have replaced the state table since the
        commit, and its uuid must not name this state; the next run reads the record."""
        if self.states is None or self.shared:
            return
        try:
            version = _state_version(self.con, request)
        except Exception:  # the table is committed; a cache not kept costs a read next run
            return
        if version is not None:
            self.states.store(request, version, state)

    def compile(self, request: ModelRequest) -> tuple[IVMPlan, Compiled]:
        view_sql, arguments = self.compile_args(request)
        plan = compile_ivm(
            view_sql,
            naming=Naming(mv_name=request.identifier, cursors_name=request.cursors_name),
            **arguments,
        )
        return plan, Compiled(plan_hash(plan), list(plan.output_columns), self.expanded)

    def compile_args(self, request: ModelRequest) -> tuple[str, dict[str, Any]]:
        """The view SQL the model compiles to and ``compile_ivm``'s other arguments (where
        the table goes, the sources' columns): the model's SQL with the views it reads
        inlined (kept as :attr:`expanded`, the state's view SQL), its outputs named as DuckDB
        names them."""
        try:
            view_sql = expand_views(
                request.sql, self.views, catalog=request.database, schema=request.schema
            )
        except SqlglotError as error:
            raise UnsupportedSQLError(
                "sql_syntax", f"duckstream cannot read the SQL: {error}"
            ) from None
        described = self.con.execute(f"SELECT * FROM (\n{request.sql}\n) LIMIT 0").description
        self.expanded = view_sql
        return name_outputs(view_sql, [d[0] for d in described]), {
            "mv_name": request.identifier,
            "mv_catalog": request.database,
            "mv_schema": request.schema,
            "schema": schema_of(
                self.con, view_sql, catalog=request.database, schema=request.schema
            ),
            "max_recursion_depth": request.max_recursion_depth,
        }

    def plan_key(self, request: ModelRequest) -> str:
        """The model's SQL, where its table and cursors go, and duckstream's code: what
        :meth:`compile` compiles from, besides what :meth:`plan_depends` reads."""
        return plans.key_of(
            "ducklake",
            request.sql,
            request.database,
            request.schema,
            request.identifier,
            request.cursors_name,
            str(request.max_recursion_depth),
            plans.code_version(),
        )

    def plan_depends(self, plan: object) -> object:
        """The views the model's names may resolve to (:func:`~dbt.adapters.duckstream.
        expand.views_named`: a view it reads may be redefined, or one created under a name
        it reads; views under other names are not its concern, so a new view elsewhere in
        the project compiles nothing again) and the columns (names, types, order) of the
        tables ``plan`` reads: as :meth:`look` read them for that plan, else read now."""
        assert isinstance(plan, IVMPlan)
        assert self.request is not None, "look() first"
        sources, read = self.read
        if sources != _sources(plan):
            read = _catalog(self.con, self.request, sources=_sources(plan))
        return sorted(views_named(self.request.sql, read.views).items()), read.columns

    def same_layout(self, request: ModelRequest, plan: object) -> bool:
        """Whether the table's columns (names and types, hidden ones included) are those the
        plan creates: then a rebuild can refill the table in place."""
        assert isinstance(plan, IVMPlan)
        create = sqlglot.parse_one(plan.create_mv, dialect="duckdb")
        query = create.expression if isinstance(create, exp.Create) else None
        if query is None:
            return False
        wanted = [
            (name, kind)
            for name, kind, *_ in self.con.execute(
                f"DESCRIBE {query.sql(dialect='duckdb')}"
            ).fetchall()
        ]
        return wanted == _column_types(self.con, request)

    def build(
        self, request: ModelRequest, plan: object, state: State, *, replace: bool, reason: str
    ) -> None:
        assert isinstance(plan, IVMPlan)
        with_state = _write_state(request, state)
        self.engine_phases = ducklake_runner.rebuild(
            self.recording,
            plan,
            replace=replace,
            before_commit=with_state,
            run=_run,
            reason=f"dbt: {reason}",
        )
        self._written(request, state)

    def refresh(self, request: ModelRequest, plan: object, state: State) -> Refreshed:
        assert isinstance(plan, IVMPlan)
        # the statistics untrusted once for the pin and the rest (begin's and finish's own
        # would read and set the settings twice: 5 statements more, ~2.5 ms CPU), in one
        # profile (begin's and finish's phases join it), logged once
        with ducklake_runner.profiling() as phases:
            with ducklake_runner.without_table_statistics(self.recording):
                refreshed = self._refresh(request, plan, state)
            self.engine_phases = phases
        ducklake_runner.log_profile("refresh", plan, self.report, phases)
        return refreshed

    def _refresh(self, request: ModelRequest, plan: IVMPlan, state: State) -> Refreshed:
        pinned = ducklake_runner.begin(
            self.recording, plan, request.strategy, run=_run, estimate_unchanged=False
        )
        window = pinned.window
        report = self.report = pinned.report
        if window is not None and not pinned.changed:
            if ducklake_runner.advances(window):  # far behind: the cursors move, nothing else
                ducklake_runner.finish(self.recording, pinned, run=_run)
            else:
                ducklake_runner.abandon(self.recording)
            return Refreshed("none", sources=len(window.sources))
        auto = "auto: " if request.strategy == "auto" else ""
        if report.strategy == "full":
            reason = "ivm_strategy full" if request.strategy == "full" else auto + report.reason
            first = [plan.create_cursors_table]
            try:
                if not self.same_layout(request, plan):
                    first.append(plan.create_mv)
            except Exception:
                ducklake_runner.abandon(self.recording)
                raise
            with_state = _write_state(request, state)
            ducklake_runner.finish(
                self.recording, pinned, rebuild_first=first, before_commit=with_state, run=_run
            )
            self._written(request, state)
            return Refreshed("full", reason)
        assert window is not None
        self.recording.counted = _key(request)
        ducklake_runner.finish(self.recording, pinned, run=_run)
        inserted, deleted = self.recording.inserted, self.recording.deleted
        touched = {
            (source.split(".", 1)[0], snapshot)
            for source, snapshots in window.snapshots.items()
            for snapshot in snapshots
        }
        # a model that reads the clock in a temporal filter says when the clock moved (auto's
        # reason says it already): the rows that crossed today are changes with no source's
        moved = (
            f"the clock moved from {window.values['clock_old']} to {window.values['clock']}"
            if window.values.get("clock_moved")
            else ""
        )
        return Refreshed(
            "incremental",
            reason=auto + report.reason if auto else moved,
            sources=len(window.sources),
            sources_changed=sum(bool(s) for s in window.snapshots.values()),
            inserted=inserted,
            deleted=deleted,
            snapshots=len(touched),
        )

    def recompute(self, request: ModelRequest, state_of: Callable[[list[str]], State]) -> None:
        described = self.con.execute(f"SELECT * FROM (\n{request.sql}\n) LIMIT 0").description
        cursors = _fqn(request.database, request.schema, request.cursors_name)
        _run(
            self.recording,
            [
                "BEGIN TRANSACTION",
                f"CREATE OR REPLACE TABLE {_table(request)} AS\n{request.sql}\n",
                f"DROP TABLE IF EXISTS {cursors}",
            ]
            + _write_state(request, state := state_of([d[0] for d in described]))
            + ["COMMIT"],
        )
        self._written(request, state)

    def count(self, request: ModelRequest) -> int:
        return int(self.con.execute(f"SELECT count(*) FROM {_table(request)}").fetchone()[0])


def read_state(con: Connection, request: ModelRequest) -> State | None:
    """The state row of the model, or ``None`` if it has none."""
    with _reading(con):
        if request.state_name not in _existing(con, request, [request.state_name]):
            return None
        return _read_state(con, request)


def equivalence_sql(con: Connection, request: ModelRequest, float_digits: int | None = 12) -> str:
    """The ``ivm_equivalent`` test's query (:mod:`dbt_duckstream.equivalence`)."""
    state = read_state(con, request)
    types = dict(_column_types(con, request)) if state is not None else {}
    if state is not None:  # a model reading the clock: recomputed at its refresh's clock
        view = f"{request.database}.{request.schema}.{request.identifier}"
        with _reading(con):
            newest = con.execute(ducklake_cursors.newest_query(request.database, view))
            row = newest.fetchone()
        clock = None if row is None else ducklake_cursors.recorded_clock(row[1])
        if clock is not None:
            model_sql = at_recorded_clock(state.model_sql, clock)
            state = dataclasses.replace(state, model_sql=model_sql)
    return equivalence.equivalence_sql(
        _table(request), state, types, dialect="duckdb", float_digits=float_digits
    )


# -- DuckLake reads ----------------------------------------------------------------------------
def _read_state(con: Connection, request: ModelRequest) -> State | None:
    fields = ", ".join(State.FIELDS)
    cursor = con.execute(f"SELECT {fields} FROM {_state_table(request)}")
    row = cursor.fetchone()
    return None if row is None else State.from_record(dict(zip(State.FIELDS, row, strict=True)))


def _state_version(con: Connection, request: ModelRequest) -> str | None:
    """The uuid of the model's state table (DuckLake gives a table a new one each time it is
    created or replaced: :func:`_write_state` replaces it), from the catalog's metadata."""
    meta = ducklake_cursors.metadata_database(request.database)
    row = con.execute(  # values written in: see _catalog
        f"SELECT CAST(t.table_uuid AS VARCHAR) FROM {meta}.ducklake_table AS t"
        f" JOIN {meta}.ducklake_schema AS s ON s.schema_id = t.schema_id"
        " AND s.end_snapshot IS NULL WHERE t.end_snapshot IS NULL"
        f" AND lower(s.schema_name) = lower({_literal(request.schema)})"
        f" AND lower(t.table_name) = lower({_literal(request.state_name)})"
    ).fetchall()
    return str(row[0][0]) if len(row) == 1 and row[0][0] is not None else None


def _write_state(request: ModelRequest, state: State) -> list[str]:
    values = ", ".join(_literal(v) for v in state.record().values())
    table = _state_table(request)
    return [
        f"CREATE OR REPLACE TABLE {table} (mode VARCHAR, plan_hash VARCHAR,"
        " model_sql VARCHAR, view_sql VARCHAR, columns VARCHAR,"
        " version VARCHAR, built_at TIMESTAMP WITH TIME ZONE)",
        f"INSERT INTO {table} VALUES ({values}, now())",
    ]


def at_recorded_clock(view_sql: str, clock: str) -> str:
    """``view_sql`` (DuckDB) with each time function the value of the recorded ``clock``
    (a ``TIMESTAMPTZ`` as text): the view as its refresh at that clock computed it, for a
    recomputation to compare with (dbt's ``ivm_equivalent``).

    >>> at_recorded_clock("SELECT k FROM t WHERE d >= current_date - 7", "2026-01-08 09:00:00+00")
    "SELECT k FROM t WHERE d >= CAST(CAST('2026-01-08 09:00:00+00' AS TIMESTAMPTZ) AS DATE) - 7"
    """
    instant = f"CAST({_literal(clock)} AS TIMESTAMPTZ)"
    marked = pin_clock(sqlglot.parse_one(view_sql, dialect="duckdb"))
    pinned = at_clock(
        marked,
        lambda kind: sqlglot.parse_one(
            ducklake_window.CLOCK_VALUES[kind].format(instant), dialect="duckdb"
        ),
    )
    return pinned.sql(dialect="duckdb")


def table_comment(con: Connection, catalog: str, schema: str, table: str) -> str | None:
    """The comment on a table of DuckLake ``catalog`` (None: none, or no such table), from
    the catalog's metadata tables: ``duckdb_tables()`` would size every table of every
    catalog first, 150-250 ms after each DuckLake commit."""
    meta = ducklake_cursors.metadata_database(catalog)
    row = con.execute(
        f"SELECT g.value FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s"
        " ON s.schema_id = t.schema_id AND s.end_snapshot IS NULL"
        f" LEFT JOIN {meta}.ducklake_tag AS g ON g.object_id = t.table_id"
        " AND g.key = 'comment' AND g.end_snapshot IS NULL"
        " WHERE t.end_snapshot IS NULL AND s.schema_name = ? AND t.table_name = ?",
        [schema, table],
    ).fetchone()
    return None if row is None else row[0]


def _require_ducklake(request: ModelRequest, kind: str | None) -> None:
    """Refuse a model whose database is not a DuckLake (``kind``: its type, None: missing)."""
    if kind != "ducklake":
        what = "missing" if kind is None else f"of type {kind}"
        raise ModelError(
            f"model {request.name}: incremental_ivm keeps its table in a DuckLake catalog, but"
            f" database {request.database!r} is {what}. Attach a ducklake: catalog in the"
            " profile and set database (or the model's database config) to its alias."
        )


def _column_types(con: Connection, request: ModelRequest) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ?"
        " AND schema_name = ? AND table_name = ? ORDER BY column_index",
        [request.database, request.schema, request.identifier],
    ).fetchall()
    return [(name, kind) for name, kind in rows]


def _existing(con: Connection, request: ModelRequest, names: list[str]) -> set[str]:
    """Which of the tables ``names`` exist in the model's schema."""
    return _catalog(con, request, names).tables


TableKey = tuple[str, str, str]  # lower-cased catalog, schema, table


@dataclass(frozen=True)
class CatalogRead:
    """What one read of the catalog found (:func:`_catalog`)."""

    kind: str | None  # the type of the model's database; None: not attached
    # whether other processes commit to the model's catalog (a postgres: DuckLake catalog)
    shared: bool
    tables: set[str]  # which of the tables asked for exist in the model's schema
    views: dict[ViewKey, str]  # every view, keyed as expand_views wants
    columns: list[tuple[str, ...]]  # of the tables asked for: catalog, schema, table, column, type


def _catalog(
    con: Connection,
    request: ModelRequest,
    names: list[str] | None = None,
    sources: Sequence[TableKey] = (),
) -> CatalogRead:
    """One read of the catalog: the type of the model's database, which of the tables
    ``names`` (default: the model's table and its state) exist in its schema, every view
    (:func:`~dbt.adapters.duckstream.expand.catalog_views`), and the columns of the tables
    ``sources`` (in order, ``_ivm_*`` columns left out as
    :func:`~duckstream.engines.ducklake.schema.schema_of` leaves them out).

    Tables are read from ``duckdb_columns()``, not ``duckdb_tables()``: after each DuckLake
    commit the first ``duckdb_tables()`` costs 150-250 ms (it sizes every table of the
    catalog), and each model of a dbt run commits; ``duckdb_columns()`` costs a few ms.
    One plain statement, its values written in (DuckDB plans a statement with parameters
    again at binding: ~8 ms CPU more; joins and subqueries over the catalog functions cost
    more to plan than to run), the rows matched in Python: ~4 ms CPU, where one statement
    with parameters doing the matching took ~12."""
    names = names or [request.identifier, request.state_name]
    wanted = sorted({name.lower() for name in names} | {table for *_, table in sources})
    query = (
        "SELECT 'database', NULL, NULL, NULL, path, type, 0 FROM duckdb_databases()"
        f" WHERE database_name = {_literal(request.database)} UNION ALL"
        " SELECT 'view', database_name, schema_name, view_name, sql, NULL, 0"
        " FROM duckdb_views() WHERE NOT internal UNION ALL"
        " SELECT 'column', database_name, schema_name, table_name, column_name, data_type,"
        " column_index FROM duckdb_columns()"
        f" WHERE lower(table_name) IN ({', '.join(_literal(name) for name in wanted)})"
    )
    rows = con.execute(query).fetchall()
    views = {tuple(r[1:4]) for r in rows if r[0] == "view"}
    home, asked, read = (request.database, request.schema), set(names), set(sources)
    tables = {
        r[3]
        for r in rows
        if r[0] == "column" and tuple(r[1:3]) == home and r[3] in asked
        if tuple(r[1:4]) not in views
    }
    columns = sorted(
        (r[1:4], r[6], r[4], r[5])
        for r in rows
        if r[0] == "column" and (r[1].lower(), r[2].lower(), r[3].lower()) in read
        if not r[4].startswith("_ivm_")
    )
    database = next((r for r in rows if r[0] == "database"), None)
    return CatalogRead(
        kind=None if database is None else database[5],
        shared=database is None or ducklake_runner.shared_catalog(str(database[4] or "")),
        tables=tables,
        views=views_by_key([r[1:5] for r in rows if r[0] == "view"]),
        columns=[(*table, name, kind) for table, _, name, kind in columns],
    )


def _sources(plan: IVMPlan) -> list[TableKey]:
    """The tables ``plan`` reads, as :func:`_catalog` asks for them."""
    return sorted({(s.catalog.lower(), s.schema.lower(), s.table.lower()) for s in plan.sources})


@contextmanager
def _reading(con: Connection) -> Generator[None]:
    """Run reads in one transaction: the DuckLake catalog is loaded once, not per query."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    finally:
        con.execute("ROLLBACK")


def _key(request: ModelRequest) -> tuple[str, str, str]:
    """The model's table as :func:`_written` names tables."""
    return (request.database.lower(), request.schema.lower(), request.identifier.lower())


def _table(request: ModelRequest) -> str:
    return _fqn(request.database, request.schema, request.identifier)


def _state_table(request: ModelRequest) -> str:
    return _fqn(request.database, request.schema, request.state_name)


def _fqn(*parts: str) -> str:
    return ".".join(equivalence.quote(p, "duckdb") for p in parts)


def _literal(value: str) -> str:
    return literal(value, "duckdb")  # (names are cached: the same few every run)
