"""What the ``incremental_ivm`` materialization does to one model, on a DuckDB connection.

``materialize`` decides between building, rebuilding and maintaining, does it in one
transaction, and returns an :class:`Outcome` that says what happened and why:

* no table yet, ``--full-refresh``, or a table duckstream did not build: build it from a
  pinned snapshot and record the cursors;
* the compiled plan differs from the one the table was built with (model SQL edited, a view
  it reads redefined, a duckstream upgrade changed the generated SQL): rebuild;
* otherwise, with ``ivm_strategy='auto'`` (the default), estimate the change from the DuckLake
  catalog and rebuild when that is cheaper (:mod:`duckstream.strategy`; ``'full'`` always
  rebuilds, ``'incremental'`` never chooses to), else run the plan's ``maintain``
  transaction; if it raises ``duckstream: rebuild required: ...`` (a source recreated or
  altered, the cursor's snapshot expired): rebuild. The log line says which ran and why.

A rebuild keeps the table (``DELETE`` and refill, same DuckLake table id, so models reading it
keep maintaining incrementally) when the table's layout is unchanged, and replaces it
otherwise. The cursors travel in the commits that build or refresh the table
(:mod:`duckstream.ducklake_cursors`); each model keeps two small tables beside it:
``_ivm_cursors__<model>`` (an append-only log of its cursors, never read by duckstream) and
``_ivm_state__<model>`` (the hash of the plan it was built with, the model SQL and its visible
columns, read by the ``ivm_equivalent`` test). They are per model because DuckLake refuses
concurrent commits that modify one table, and dbt runs models in parallel threads.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt.adapters.duckstream.__version__ import version as VERSION
from dbt.adapters.duckstream.expand import (
    ViewKey,
    catalog_views,
    expand_views,
    name_outputs,
    table_columns,
)
from dbt.adapters.duckstream.locate import locate
from duckstream import ducklake_cursors, ducklake_window
from duckstream.compiler import compile_ivm
from duckstream.errors import RebuildRequired, UnsupportedSQLError, ViewSQLError
from duckstream.model_configs import config_problem
from duckstream.plan import IVMPlan, Naming
from duckstream.runtime import run_statements
from duckstream.strategy import Policy, choose

MODE_IVM = "ivm"
MODE_RECOMPUTE = "recompute"


class Connection(Protocol):
    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any: ...


class ModelError(Exception):
    """The model cannot be materialized as asked; the message says why and what to do."""


@dataclass(frozen=True)
class ModelRequest:
    """One model to materialize: where its table goes and the SQL it is defined by."""

    name: str
    database: str
    schema: str
    identifier: str
    sql: str
    raw_sql: str = ""
    path: str = ""
    full_refresh: bool = False
    on_unsupported: str = "fail"
    on_schema_change: str = "sync_all_columns"
    strategy: str = "auto"  # ivm_strategy: auto | incremental | full

    @property
    def table(self) -> str:
        return _fqn(self.database, self.schema, self.identifier)

    @property
    def cursors_name(self) -> str:
        return f"_ivm_cursors__{self.identifier}"

    @property
    def state_name(self) -> str:
        return f"_ivm_state__{self.identifier}"

    @property
    def state_table(self) -> str:
        return _fqn(self.database, self.schema, self.state_name)


@dataclass
class Outcome:
    """What one materialization did, for the run log and the run result."""

    action: str  # built | rebuilt | incremental | up to date | recomputed
    reason: str = ""
    rows: int | None = None
    inserted: int = 0
    deleted: int = 0
    sources: int = 0
    sources_changed: int = 0
    snapshots: int = 0
    elapsed_ms: float = 0.0
    replaced: bool = False  # the table is a new table (grants and docs to apply again)
    warnings: list[str] = field(default_factory=list)

    def message(self) -> str:
        """One line, e.g. ``incremental: +120 -3 rows from 2 sources, 14 snapshots, 38 ms``."""
        ms = f"{self.elapsed_ms:.0f} ms"
        if self.action == "incremental":
            plural = "s" if self.sources_changed != 1 else ""
            because = f" ({self.reason})" if self.reason else ""
            return (
                f"incremental{because}: +{self.inserted} -{self.deleted} rows"
                f" from {self.sources_changed}"
                f" source{plural}, {self.snapshots} snapshot{'s' if self.snapshots != 1 else ''},"
                f" {ms}"
            )
        if self.action == "up to date":
            return f"up to date: no source changes, {ms}"
        because = f" ({self.reason})" if self.reason else ""
        return f"{self.action}{because}: {self.rows} rows, {ms}"


@dataclass(frozen=True)
class State:
    """The row of ``_ivm_state__<model>``."""

    mode: str
    plan_hash: str
    model_sql: str
    view_sql: str
    columns: list[str]
    version: str


def materialize(con: Connection, request: ModelRequest) -> Outcome:
    """Build, rebuild or maintain the table of ``request``; see the module docstring."""
    started = time.perf_counter()
    problem = config_problem(
        request.name, ivm_on_unsupported=request.on_unsupported, ivm_strategy=request.strategy
    )
    if problem:
        raise ModelError(problem)
    with _reading(con):
        found = _look(con, request)
    try:
        view_sql = expand_views(
            request.sql, found.views, catalog=request.database, schema=request.schema
        )
    except SqlglotError as error:
        unreadable = UnsupportedSQLError("sql_syntax", f"duckstream cannot read the SQL: {error}")
        return _timed(_unsupported(con, request, unreadable), started)
    if _up_to_date(request, found, view_sql):
        return _timed(Outcome(action="up to date", sources=len(found.cursors or {})), started)
    try:
        described = con.execute(f"SELECT * FROM (\n{request.sql}\n) LIMIT 0").description
        plan = compile_ivm(
            name_outputs(view_sql, [d[0] for d in described]),
            mv_name=request.identifier,
            mv_catalog=request.database,
            mv_schema=request.schema,
            naming=Naming(mv_name=request.identifier, cursors_name=request.cursors_name),
            schema=table_columns(con, view_sql, catalog=request.database, schema=request.schema),
        )
    except UnsupportedSQLError as error:
        return _timed(_unsupported(con, request, error), started)
    except ViewSQLError as error:
        unreadable = UnsupportedSQLError("sql_syntax", str(error))
        return _timed(_unsupported(con, request, unreadable), started)
    rebuild = _rebuild_reason(con, request, found, plan, view_sql)
    if rebuild is not None:
        reason, replace = rebuild
        outcome = _build(con, request, plan, view_sql, replace=replace, reason=reason)
    else:
        assert found.cursors is not None
        outcome = _maintain(con, request, plan, view_sql, found.cursors, found.snapshot)
    return _timed(outcome, started)


@dataclass
class Found:
    """The model's tables as this run finds them (read in one transaction)."""

    table: bool
    state: State | None
    cursors: dict[str, tuple[int, int]] | None  # source -> (table id, snapshot); None: none
    views: dict[ViewKey, str]
    snapshot: int  # the catalog's latest snapshot
    sources_unchanged: bool


def _look(con: Connection, request: ModelRequest) -> Found:
    _require_ducklake(con, request)
    names = _existing(con, request, [request.identifier, request.state_name])
    state = _read_state(con, request) if request.state_name in names else None
    cursors = _cursors(con, request)
    return Found(
        table=request.identifier in names,
        state=state,
        cursors=cursors,
        views=catalog_views(con),
        snapshot=_snapshot(con, request.database),
        sources_unchanged=bool(cursors) and _sources_unchanged(con, request, cursors or {}),
    )


def _up_to_date(request: ModelRequest, found: Found, view_sql: str) -> bool:
    """Same SQL, same duckstream, no source change since the cursors: nothing to compile."""
    return (
        found.table
        and not request.full_refresh
        and found.state is not None
        and found.state.mode == MODE_IVM
        and found.state.view_sql == view_sql
        and found.state.version == VERSION
        and found.sources_unchanged
    )


def _rebuild_reason(
    con: Connection, request: ModelRequest, found: Found, plan: IVMPlan, view_sql: str
) -> tuple[str, bool] | None:
    """Why the table must be (re)built, and whether it must be replaced; ``None``: maintain."""
    state = found.state
    if not found.table:
        return "first run", True
    if request.full_refresh:
        return "full refresh", True
    if state is None:
        return "table not built by incremental_ivm", True
    if state.mode != MODE_IVM:
        return "was recomputed, now maintainable", True
    if state.plan_hash != plan_hash(plan):
        _check_schema_change(request, state, plan)
        return _why_changed(request, state, view_sql), not _same_layout(con, request, plan)
    if found.cursors is None:
        return "no cursors recorded", False
    return None


def _unsupported(con: Connection, request: ModelRequest, error: UnsupportedSQLError) -> Outcome:
    """Fail naming the construct and its line, or recompute when the model allows it."""
    where = _where(error, request)
    if request.on_unsupported == "fail":
        raise ModelError(
            f"duckstream cannot maintain model {request.name} incrementally: {error.feature}"
            f" {where}: {error.message}. Rewrite the model, or set"
            " config(ivm_on_unsupported='full_refresh') to recompute it on every run."
        )
    outcome = _recompute(con, request)
    outcome.reason = f"{error.feature} {where} is not maintainable"
    outcome.warnings.append(
        f"model {request.name} is recomputed on every run: {error.feature} {where}"
        f" cannot be maintained incrementally ({error.message})"
    )
    return outcome


def plan_hash(plan: IVMPlan) -> str:
    """Identifies the plan: the SQL that creates, fills and maintains the table."""
    return _hash([plan.create_mv, plan.initialize_cursors, plan.maintain, plan.query_mv])


def read_state(con: Connection, request: ModelRequest) -> State | None:
    """The state row of the model, or ``None`` if it has none."""
    with _reading(con):
        if request.state_name not in _existing(con, request, [request.state_name]):
            return None
        return _read_state(con, request)


def _read_state(con: Connection, request: ModelRequest) -> State | None:
    row = con.execute(
        f"SELECT mode, plan_hash, model_sql, view_sql, columns, version FROM {request.state_table}"
    ).fetchone()
    if row is None:
        return None
    mode, plan_h, model_sql, view_sql, columns, version = row
    return State(mode, plan_h, model_sql, view_sql, json.loads(columns), version)


def equivalence_sql(con: Connection, request: ModelRequest, float_digits: int | None = 12) -> str:
    """A query returning the rows on which the table and a recomputation of its SQL differ.

    Symmetric ``EXCEPT ALL`` over the visible columns (set operations compare NULLs as equal),
    with a ``_ivm_side`` column saying whether the row is ``missing`` from the table or
    ``unexpected`` in it. Floating-point columns are compared to ``float_digits`` significant
    digits (``None``: exactly): a sum of doubles maintained change by change is rounded in
    another order than a recomputation's. Without state the query returns one row saying so.
    """
    state = read_state(con, request)
    if state is None:
        note = f"{request.table} has no duckstream state: it was not built by incremental_ivm"
        return f"SELECT {_literal(note)} AS _ivm_side"
    types = dict(
        con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ?"
            " AND schema_name = ? AND table_name = ?",
            [request.database, request.schema, request.identifier],
        ).fetchall()
    )
    columns = ", ".join(
        _compared(c, types.get(c, ""), float_digits) + f" AS {_quote(c)}" for c in state.columns
    )
    return (
        f"WITH _ivm_actual AS (SELECT {columns} FROM {request.table}),\n"
        f"_ivm_expected AS (SELECT {columns} FROM (\n{state.model_sql}\n) AS _ivm_model)\n"
        "SELECT 'missing' AS _ivm_side, * FROM (SELECT * FROM _ivm_expected"
        " EXCEPT ALL SELECT * FROM _ivm_actual)\n"
        "UNION ALL\n"
        "SELECT 'unexpected' AS _ivm_side, * FROM (SELECT * FROM _ivm_actual"
        " EXCEPT ALL SELECT * FROM _ivm_expected)"
    )


def _compared(column: str, data_type: str, float_digits: int | None) -> str:
    """``column`` as compared: doubles rounded to ``float_digits`` significant digits."""
    name = _quote(column)
    if float_digits is None or data_type.upper() not in ("DOUBLE", "FLOAT", "REAL"):
        return name
    return (
        f"CASE WHEN {name} = 0 OR NOT isfinite({name}) THEN {name} ELSE round({name},"
        f" {float_digits} - CAST(ceil(log10(abs({name}))) AS INTEGER)) END"
    )


# -- building ----------------------------------------------------------------------------------
def _build(
    con: Connection,
    request: ModelRequest,
    plan: IVMPlan,
    view_sql: str,
    *,
    replace: bool,
    reason: str,
) -> Outcome:
    """Fill the table from a pinned snapshot and record the cursors, in one transaction."""
    body = _transaction_body(plan.initialize_cursors)
    create = [plan.create_mv] if replace else []
    state = State(
        MODE_IVM,
        plan_hash(plan),
        request.sql,
        view_sql,
        list(plan.output_columns),
        VERSION,
    )
    run_statements(
        con,
        ["BEGIN TRANSACTION", plan.create_cursors_table, *create, *body]
        + _write_state(request, state)
        + ["COMMIT"],
    )
    first = reason == "first run"
    return Outcome(
        action="built" if first else "rebuilt",
        reason="" if first else reason,
        rows=_count(con, request.table),
        replaced=replace,
    )


def _recompute(con: Connection, request: ModelRequest) -> Outcome:
    """Replace the table by the model's result, atomically (the fallback for unsupported SQL)."""
    columns = [d[0] for d in con.execute(f"SELECT * FROM (\n{request.sql}\n) LIMIT 0").description]
    state = State(MODE_RECOMPUTE, "", request.sql, request.sql, columns, VERSION)
    run_statements(
        con,
        [
            "BEGIN TRANSACTION",
            f"CREATE OR REPLACE TABLE {request.table} AS\n{request.sql}\n",
            f"DROP TABLE IF EXISTS {_fqn(request.database, request.schema, request.cursors_name)}",
        ]
        + _write_state(request, state)
        + ["COMMIT"],
    )
    return Outcome(action="recomputed", rows=_count(con, request.table), replaced=True)


def _write_state(request: ModelRequest, state: State) -> list[str]:
    values = ", ".join(
        _literal(v)
        for v in [
            state.mode,
            state.plan_hash,
            state.model_sql,
            state.view_sql,
            json.dumps(state.columns),
            state.version,
        ]
    )
    return [
        f"CREATE OR REPLACE TABLE {request.state_table} (mode VARCHAR, plan_hash VARCHAR,"
        " model_sql VARCHAR, view_sql VARCHAR, columns VARCHAR,"
        " version VARCHAR, built_at TIMESTAMP WITH TIME ZONE)",
        f"INSERT INTO {request.state_table} VALUES ({values}, now())",
    ]


# -- maintaining -------------------------------------------------------------------------------
def _maintain(
    con: Connection,
    request: ModelRequest,
    plan: IVMPlan,
    view_sql: str,
    before: dict[str, tuple[int, int]],
    snapshot: int,
) -> Outcome:
    """Apply the changes since the cursors; rebuild when the strategy or the plan says so."""

    def rebuild(reason: str) -> Outcome:
        """In place when the table's layout is unchanged, replaced otherwise."""
        replace = not _same_layout(con, request, plan)
        return _build(con, request, plan, view_sql, replace=replace, reason=reason)

    chosen = ""
    if request.strategy == "full":
        return rebuild("ivm_strategy full")
    if request.strategy == "auto":
        report = choose(con, plan, Policy())
        if report.strategy == "full":
            return rebuild(f"auto: {report.reason}")
        chosen = f"auto: {report.reason}"
    try:
        run_statements(con, plan.maintain)
    except RebuildRequired as error:
        return rebuild(error.reason)
    with _reading(con):
        after = _cursors(con, request) or before
        if after == before:
            return Outcome(action="up to date", sources=len(before))
        inserted, deleted = _changes(con, request, snapshot)
        snapshots, changed = _window(con, before, after)
    return Outcome(
        action="incremental",
        reason=chosen,
        inserted=inserted,
        deleted=deleted,
        sources=len(before),
        sources_changed=changed,
        snapshots=snapshots,
    )


def _sources_unchanged(con: Connection, request: ModelRequest, cursors: dict) -> bool:
    """The window since the cursors holds no change of a source, and can be maintained.

    The cheap check before compiling: when it holds, ``maintain`` would change nothing. The
    same rules as the refresh's own window (:mod:`duckstream.ducklake_window`).
    """
    view = f"{request.database}.{request.schema}.{request.identifier}"
    spec = ducklake_window.WindowSpec(
        variable="",
        view=view,
        catalogs=sorted({source.split(".", 1)[0] for source in cursors} | {request.database}),
        sources=sorted(cursors),
    )
    try:
        return not ducklake_window.read(con, spec.statement()).values["changed"]
    except RebuildRequired:
        return False


def _cursors(con: Connection, request: ModelRequest) -> dict[str, tuple[int, int]] | None:
    """The model's cursors, from the snapshot its last build or refresh committed."""
    view = f"{request.database}.{request.schema}.{request.identifier}"
    return ducklake_cursors.read(con, request.database, view)


def _changes(con: Connection, request: ModelRequest, since: int) -> tuple[int, int]:
    """Rows inserted into and deleted from the table after snapshot ``since``."""
    now = _snapshot(con, request.database)
    args = ", ".join(
        [_literal(request.database), _literal(request.schema), _literal(request.identifier)]
    )
    row = con.execute(
        f"SELECT (SELECT count(*) FROM ducklake_table_insertions({args}, {since + 1}, {now})),"
        f" (SELECT count(*) FROM ducklake_table_deletions({args}, {since + 1}, {now}))"
    ).fetchone()
    return int(row[0]), int(row[1])


def _window(
    con: Connection, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> tuple[int, int]:
    """Snapshots in the refresh window that changed a source, and how many sources changed."""
    snapshots: set[tuple[str, int]] = set()
    changed = 0
    for source, (table_id, start) in before.items():
        end = after.get(source, (table_id, start))[1]
        catalog = source.split(".", 1)[0]
        rows = con.execute(
            "SELECT snapshot_id, changes_made FROM"
            f" {ducklake_cursors.metadata_database(catalog)}.ducklake_snapshot_changes"
            f" WHERE snapshot_id > {start} AND snapshot_id <= {end}"
        ).fetchall()
        touching = {
            (catalog, snapshot)
            for snapshot, changes_made in rows
            if any(t == str(table_id) for _, t in ducklake_window.changed_tables(changes_made))
        }
        snapshots |= touching
        changed += bool(touching)
    return len(snapshots), changed


# -- helpers -----------------------------------------------------------------------------------
def _why_changed(request: ModelRequest, state: State, view_sql: str) -> str:
    if state.model_sql != request.sql:
        return "model SQL changed"
    if state.view_sql != view_sql:
        return "a view the model reads was redefined"
    if state.version != VERSION:
        return f"duckstream {state.version} -> {VERSION} compiles the model differently"
    return "the columns of a table it reads changed"


def _check_schema_change(request: ModelRequest, state: State, plan: IVMPlan) -> None:
    if request.on_schema_change == "fail" and state.columns != list(plan.output_columns):
        raise ModelError(
            f"model {request.name}: its columns changed from {state.columns} to"
            f" {list(plan.output_columns)} and on_schema_change is 'fail'. Run with"
            " --full-refresh to rebuild it."
        )


def _where(error: UnsupportedSQLError, request: ModelRequest) -> str:
    line = locate(error, request.sql, request.raw_sql)
    path = request.path or "the model"
    if line is None:
        return f"in {path} or a view it reads"
    return f"at line {line} of {path}"


def _require_ducklake(con: Connection, request: ModelRequest) -> None:
    row = con.execute(
        "SELECT type FROM duckdb_databases() WHERE database_name = ?", [request.database]
    ).fetchone()
    if row is None or row[0] != "ducklake":
        kind = "missing" if row is None else f"of type {row[0]}"
        raise ModelError(
            f"model {request.name}: incremental_ivm keeps its table in a DuckLake catalog, but"
            f" database {request.database!r} is {kind}. Attach a ducklake: catalog in the"
            " profile and set database (or the model's database config) to its alias."
        )


def _same_layout(con: Connection, request: ModelRequest, plan: IVMPlan) -> bool:
    """Whether the table's columns (names and types, hidden ones included) are those the plan
    creates: then a rebuild can refill the table in place."""
    create = sqlglot.parse_one(plan.create_mv, dialect="duckdb")
    query = create.expression if isinstance(create, exp.Create) else None
    if query is None:
        return False
    wanted = [
        (name, kind)
        for name, kind, *_ in con.execute(f"DESCRIBE {query.sql(dialect='duckdb')}").fetchall()
    ]
    current = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ?"
        " AND schema_name = ? AND table_name = ? ORDER BY column_index",
        [request.database, request.schema, request.identifier],
    ).fetchall()
    return wanted == [tuple(row) for row in current]


def _existing(con: Connection, request: ModelRequest, names: list[str]) -> set[str]:
    """Which of the tables ``names`` exist in the model's schema."""
    marks = ", ".join("?" for _ in names)
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = ?"
        f" AND table_name IN ({marks})",
        [request.database, request.schema, *names],
    ).fetchall()
    return {name for (name,) in rows}


@contextmanager
def _reading(con: Connection) -> Generator[None]:
    """Run reads in one transaction: the DuckLake catalog is loaded once, not per query."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    finally:
        con.execute("ROLLBACK")


def _snapshot(con: Connection, catalog: str) -> int:
    row = con.execute(f"SELECT id FROM ducklake_current_snapshot({_literal(catalog)})")
    return int(row.fetchone()[0])


def _count(con: Connection, table: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _transaction_body(statements: list[str]) -> list[str]:
    """The statements between a plan step's ``BEGIN`` and ``COMMIT``."""
    if (
        len(statements) < 2
        or not statements[0].strip().upper().startswith("BEGIN")
        or statements[-1].strip().upper() != "COMMIT"
    ):
        raise RuntimeError(f"duckstream: expected a BEGIN ... COMMIT step, got {statements[:1]}")
    return statements[1:-1]


def _timed(outcome: Outcome, started: float) -> Outcome:
    outcome.elapsed_ms = (time.perf_counter() - started) * 1000
    return outcome


def _hash(parts: list[Any]) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fqn(*parts: str) -> str:
    return ".".join(_quote(p) for p in parts)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
