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

from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt.adapters.duckstream.__version__ import version as VERSION
from dbt.adapters.duckstream.expand import (
    ViewKey,
    catalog_views,
    expand_views,
    name_outputs,
)
from dbt_duckstream import equivalence
from dbt_duckstream.decide import Compiled, Found
from dbt_duckstream.materialize import Refreshed
from dbt_duckstream.materialize import materialize as materialize_with
from dbt_duckstream.model import ModelError, ModelRequest, State, plan_hash
from dbt_duckstream.outcome import Outcome
from duckstream.compiler import compile_ivm
from duckstream.connection import Connection
from duckstream.engines.ducklake import runner as strategy
from duckstream.engines.ducklake.runner import run_statements
from duckstream.engines.ducklake.schema import schema_of
from duckstream.errors import UnsupportedSQLError
from duckstream.plan import IVMPlan, Naming

__all__ = [
    "DuckLakeBackend",
    "ModelError",
    "ModelRequest",
    "Outcome",
    "equivalence_sql",
    "materialize",
    "read_state",
]


def materialize(con: Connection, request: ModelRequest) -> Outcome:
    """Build, rebuild or maintain the table of ``request`` (:mod:`dbt_duckstream.materialize`)."""
    return materialize_with(DuckLakeBackend(con), request)


def _run(con: Connection, statements: list[str], *, opened: bool = False) -> None:
    """The runner (looked up when called: tests replace ``run_statements`` here)."""
    run_statements(con, statements, opened=opened)


class Recording:
    """``con``, writing down every statement it executes (the SQL a model run ran)."""

    def __init__(self, con: Connection, executed: list[str]) -> None:
        self.con = con
        self.executed = executed

    def execute(self, query: str, /, *args: Any, **kwargs: Any) -> Any:
        self.executed.append(query)
        return self.con.execute(query, *args, **kwargs)


class DuckLakeBackend:
    """The :class:`dbt_duckstream.materialize.Backend` of a DuckDB connection with the model's
    DuckLake catalog attached."""

    dialect = "duckdb"
    version = VERSION

    def __init__(self, con: Connection) -> None:
        self.con = con
        self.executed: list[str] = []
        self.recording = Recording(con, self.executed)
        self.views: dict[ViewKey, str] = {}
        self.snapshot = 0  # the catalog's snapshot when the run looked

    def look(self, request: ModelRequest) -> Found:
        _require_ducklake(self.con, request)
        with _reading(self.con):
            names = _existing(self.con, request, [request.identifier, request.state_name])
            state = _read_state(self.con, request) if request.state_name in names else None
            self.views = catalog_views(self.con)
            self.snapshot = _snapshot(self.con, request.database)
        return Found(table=request.identifier in names, state=state)

    def compile(self, request: ModelRequest) -> tuple[IVMPlan, Compiled]:
        try:
            view_sql = expand_views(
                request.sql, self.views, catalog=request.database, schema=request.schema
            )
        except SqlglotError as error:
            raise UnsupportedSQLError(
                "sql_syntax", f"duckstream cannot read the SQL: {error}"
            ) from None
        described = self.con.execute(f"SELECT * FROM (\n{request.sql}\n) LIMIT 0").description
        plan = compile_ivm(
            name_outputs(view_sql, [d[0] for d in described]),
            mv_name=request.identifier,
            mv_catalog=request.database,
            mv_schema=request.schema,
            naming=Naming(mv_name=request.identifier, cursors_name=request.cursors_name),
            schema=schema_of(self.con, view_sql, catalog=request.database, schema=request.schema),
        )
        return plan, Compiled(plan_hash(plan), list(plan.output_columns), view_sql)

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

    def build(self, request: ModelRequest, plan: object, state: State, *, replace: bool) -> None:
        assert isinstance(plan, IVMPlan)
        with_state = _write_state(request, state)
        strategy.rebuild(self.recording, plan, replace=replace, before_commit=with_state, run=_run)

    def refresh(self, request: ModelRequest, plan: object, state: State) -> Refreshed:
        assert isinstance(plan, IVMPlan)
        pinned = strategy.begin(
            self.recording, plan, request.strategy, run=_run, estimate_unchanged=False
        )
        window = pinned.window
        if window is not None and not pinned.changed:
            strategy.abandon(self.recording)
            return Refreshed("none", sources=len(window.sources))
        report = pinned.report
        auto = "auto: " if request.strategy == "auto" else ""
        if report.strategy == "full":
            reason = "ivm_strategy full" if request.strategy == "full" else auto + report.reason
            first = [plan.create_cursors_table]
            try:
                if not self.same_layout(request, plan):
                    first.append(plan.create_mv)
            except Exception:
                strategy.abandon(self.recording)
                raise
            with_state = _write_state(request, state)
            strategy.finish(
                self.recording, pinned, rebuild_first=first, before_commit=with_state, run=_run
            )
            return Refreshed("full", reason)
        assert window is not None
        strategy.finish(self.recording, pinned, run=_run)
        inserted, deleted = _changes(self.con, request, self.snapshot)
        touched = {
            (source.split(".", 1)[0], snapshot)
            for source, snapshots in window.snapshots.items()
            for snapshot in snapshots
        }
        return Refreshed(
            "incremental",
            reason=auto + report.reason if auto else "",
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
            + _write_state(request, state_of([d[0] for d in described]))
            + ["COMMIT"],
        )

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
    return equivalence.equivalence_sql(
        _table(request), state, types, dialect="duckdb", float_digits=float_digits
    )


# -- DuckLake reads ----------------------------------------------------------------------------
def _read_state(con: Connection, request: ModelRequest) -> State | None:
    fields = ", ".join(State.FIELDS)
    cursor = con.execute(f"SELECT {fields} FROM {_state_table(request)}")
    row = cursor.fetchone()
    return None if row is None else State.from_record(dict(zip(State.FIELDS, row, strict=True)))


def _write_state(request: ModelRequest, state: State) -> list[str]:
    values = ", ".join(_literal(v) for v in state.record().values())
    table = _state_table(request)
    return [
        f"CREATE OR REPLACE TABLE {table} (mode VARCHAR, plan_hash VARCHAR,"
        " model_sql VARCHAR, view_sql VARCHAR, columns VARCHAR,"
        " version VARCHAR, built_at TIMESTAMP WITH TIME ZONE)",
        f"INSERT INTO {table} VALUES ({values}, now())",
    ]


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


def _column_types(con: Connection, request: ModelRequest) -> list[tuple[str, str]]:
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ?"
        " AND schema_name = ? AND table_name = ? ORDER BY column_index",
        [request.database, request.schema, request.identifier],
    ).fetchall()
    return [(name, kind) for name, kind in rows]


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


def _table(request: ModelRequest) -> str:
    return _fqn(request.database, request.schema, request.identifier)


def _state_table(request: ModelRequest) -> str:
    return _fqn(request.database, request.schema, request.state_name)


def _fqn(*parts: str) -> str:
    return ".".join(equivalence.quote(p, "duckdb") for p in parts)


def _literal(value: str) -> str:
    return equivalence.literal(value, "duckdb")
