"""What the ``incremental_ivm`` materialization does to one model, on a Spark session.

``materialize`` decides between building, rebuilding and maintaining, using duckstream's
Spark runner (:mod:`duckstream.spark.runtime`), and returns an :class:`Outcome`:

* no table yet, ``--full-refresh``, a table duckstream did not build, or a plan that differs
  from the one the table was built with (model SQL edited, a duckstream upgrade): build it
  (``setup``: create or replace the table, fill it at pinned snapshots, record the cursors);
* otherwise, with ``ivm_strategy='auto'`` (the default), estimate the change from Iceberg
  metadata (:func:`duckstream.spark.estimate.choose`) and re-initialize the table in place
  when that is cheaper or maintaining is impossible (logged ``rebuilt (auto: <reason>)``);
  else maintain it; if maintaining raises :class:`RebuildRequired` (a source's schema
  changed, ...), re-initialize in place and log why.

The state of a model lives in table properties of its table (``duckstream.*``): the plan's
hash, the model SQL (base64), its visible columns, the mode (``ivm`` or ``recompute``) and
duckstream's version. Setting them commits no Iceberg snapshot, so they never disturb the
cursors (kept in the table's snapshot summaries) nor models reading the table. Cursors are
mirrored in ``_ivm_cursors__<model>`` (one per model: dbt runs models in parallel threads).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dbt.adapters.duckstream_spark.__version__ import version as VERSION
from duckstream.compiler import compile_ivm
from duckstream.errors import UnsupportedSQLError, ViewSQLError
from duckstream.model_configs import config_problem
from duckstream.plan import IVMPlan, Naming
from duckstream.spark.estimate import choose
from duckstream.spark.runtime import RebuildRequired, run_statements, setup

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODE_IVM = "ivm"
MODE_RECOMPUTE = "recompute"
PREFIX = "duckstream."
_CHANGED = re.compile(r"\.changed_[0-9]+$")
_FLOATS = ("double", "float")


class ModelError(Exception):
    """The model cannot be materialized as asked; the message says why and what to do."""


@dataclass(frozen=True)
class ModelRequest:
    """One model to materialize: where its table goes and the SQL it is defined by."""

    name: str
    schema: str
    identifier: str
    sql: str
    path: str = ""
    full_refresh: bool = False
    on_unsupported: str = "fail"
    on_schema_change: str = "sync_all_columns"
    strategy: str = "auto"  # ivm_strategy: auto | incremental | full

    @property
    def cursors_name(self) -> str:
        return f"_ivm_cursors__{self.identifier}"


@dataclass
class State:
    """The ``duckstream.*`` table properties of a model's table."""

    mode: str
    plan_hash: str
    model_sql: str
    columns: list[str]
    version: str

    def properties(self) -> dict[str, str]:
        return {
            "mode": self.mode,
            "plan_hash": self.plan_hash,
            "model_sql": base64.b64encode(self.model_sql.encode()).decode(),
            "columns": json.dumps(self.columns),
            "version": self.version,
        }

    @classmethod
    def from_properties(cls, found: dict[str, str]) -> State | None:
        try:
            return cls(
                mode=found["mode"],
                plan_hash=found["plan_hash"],
                model_sql=base64.b64decode(found["model_sql"]).decode(),
                columns=json.loads(found["columns"]),
                version=found["version"],
            )
        except (KeyError, ValueError):
            return None


@dataclass
class Outcome:
    """What one materialization did, for the run log and the run result."""

    action: str  # built | rebuilt | incremental | up to date | recomputed
    reason: str = ""
    rows: int | None = None
    sources: int = 0
    sources_changed: int = 0
    elapsed_ms: float = 0.0
    replaced: bool = False  # the table is new (grants and docs to apply again)
    warnings: list[str] = field(default_factory=list)

    def message(self) -> str:
        """One line, e.g. ``incremental (auto: ...): 1 of 2 sources changed, 120 rows,
        3400 ms``."""
        ms = f"{self.elapsed_ms:.0f} ms"
        rows = f"{self.rows} rows" if self.rows is not None else "rows unknown"
        reason = f" ({self.reason})" if self.reason else ""
        if self.action == "incremental":
            return (
                f"incremental{reason}: {self.sources_changed} of {self.sources} sources"
                f" changed, {rows}, {ms}"
            )
        if self.action == "up to date":
            return f"up to date: no source changed, {ms}"
        return f"{self.action}{reason}: {rows}, {ms}"


def materialize(spark: SparkSession, request: ModelRequest) -> Outcome:
    """Build, rebuild or maintain the table of ``request``; see the module docstring."""
    started = time.perf_counter()
    problem = config_problem(
        request.name, ivm_on_unsupported=request.on_unsupported, ivm_strategy=request.strategy
    )
    if problem:
        raise ModelError(problem)
    catalog = current_catalog(spark)
    table = _fqn(catalog, request.schema, request.identifier)
    exists = spark.catalog.tableExists(table)
    state = read_state(spark, table) if exists else None
    try:
        plan = compile_ivm(
            request.sql,
            dialect="spark",
            mv_catalog=catalog,
            mv_schema=request.schema,
            naming=Naming(mv_name=request.identifier, cursors_name=request.cursors_name),
        )
    except UnsupportedSQLError as error:
        return _timed(_unsupported(spark, request, table, error), started)
    except ViewSQLError as error:
        unreadable = UnsupportedSQLError("sql_syntax", str(error))
        return _timed(_unsupported(spark, request, table, unreadable), started)
    reason = _rebuild_reason(request, exists, state, plan)
    if reason is not None:
        setup(spark, plan)
        _write_state(spark, table, _state(request, plan, MODE_IVM))
        action = "built" if reason == "first run" else "rebuilt"
        outcome = Outcome(action=action, reason=reason, replaced=True)
    else:
        outcome = _maintain(spark, plan, request.strategy)
    outcome.rows = spark.table(table).count()
    return _timed(outcome, started)


def _rebuild_reason(
    request: ModelRequest, exists: bool, state: State | None, plan: IVMPlan
) -> str | None:
    """Why the table must be built again from scratch; ``None``: maintain it."""
    if not exists:
        return "first run"
    if request.full_refresh:
        return "full refresh"
    if request.strategy == "full":
        return "ivm_strategy full"
    if state is None:
        return "table not built by incremental_ivm"
    if state.mode != MODE_IVM:
        return "was recomputed, now maintainable"
    if state.plan_hash != plan_hash(plan):
        if request.on_schema_change == "fail" and state.columns != list(plan.output_columns):
            raise ModelError(
                f"model {request.name}: its columns changed from {state.columns} to"
                f" {list(plan.output_columns)} and on_schema_change is 'fail'. Run with"
                " --full-refresh to rebuild it."
            )
        if state.model_sql != request.sql:
            return "model SQL changed"
        if state.version != VERSION:
            return f"duckstream {state.version} -> {VERSION} compiles the model differently"
        return "the compiled plan changed"
    return None


def _maintain(spark: SparkSession, plan: IVMPlan, strategy: str) -> Outcome:
    """Apply the changes since the cursors; rebuild in place when the strategy, the estimate
    (``auto``) or the refresh itself (a window Iceberg cannot read) says so."""

    def rebuild(reason: str) -> Outcome:
        run_statements(spark, plan.initialize_cursors)
        return Outcome(action="rebuilt", reason=reason, sources=len(plan.base_tables))

    chosen = ""
    if strategy == "auto":
        report = choose(spark, plan)
        if report.strategy == "full":
            return rebuild(f"auto: {report.reason}")
        chosen = f"auto: {report.reason}"
    try:
        values = run_statements(spark, plan.maintain)
    except RebuildRequired as error:
        return rebuild(error.reason)
    flags = {k: v for k, v in values.items() if _CHANGED.search(k)}
    changed = sum(v == "true" for v in flags.values())
    return Outcome(
        action="incremental" if changed else "up to date",
        reason=chosen,
        sources=len(flags) or len(plan.base_tables),
        sources_changed=changed,
    )


def _unsupported(
    spark: SparkSession, request: ModelRequest, table: str, error: UnsupportedSQLError
) -> Outcome:
    """Fail naming the model and the construct, or recompute when the model allows it."""
    path = request.path or "the model"
    if request.on_unsupported == "fail":
        raise ModelError(
            f"duckstream cannot maintain model {request.name} ({path}) incrementally:"
            f" {error.feature}: {error.message}. Rewrite the model, or set"
            " config(ivm_on_unsupported='full_refresh') to recompute it on every run."
        )
    spark.sql(f"CREATE OR REPLACE TABLE {table} USING iceberg AS\n{request.sql}")
    columns = spark.table(table).columns
    _write_state(spark, table, State(MODE_RECOMPUTE, "", request.sql, columns, VERSION))
    return Outcome(
        action="recomputed",
        reason=f"{error.feature} is not maintainable",
        rows=spark.table(table).count(),
        replaced=True,
        warnings=[
            f"model {request.name} is recomputed on every run: {error.feature} cannot be"
            f" maintained incrementally ({error.message})"
        ],
    )


def plan_hash(plan: IVMPlan) -> str:
    """Identifies the plan: the SQL that creates, fills and maintains the table."""
    parts = [plan.create_mv, plan.initialize_cursors, plan.maintain, plan.query_mv]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def read_state(spark: SparkSession, table: str) -> State | None:
    """The duckstream state of ``table`` (its ``duckstream.*`` properties), if it has one."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
    found = {
        str(row[0]).removeprefix(PREFIX): str(row[1])
        for row in rows
        if str(row[0]).startswith(PREFIX)
    }
    return State.from_properties(found)


def _write_state(spark: SparkSession, table: str, state: State) -> None:
    pairs = ", ".join(
        f"{_literal(PREFIX + key)} = {_literal(value)}" for key, value in state.properties().items()
    )
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")


def _state(request: ModelRequest, plan: IVMPlan, mode: str) -> State:
    return State(mode, plan_hash(plan), request.sql, list(plan.output_columns), VERSION)


def equivalence_sql(
    spark: SparkSession, schema: str, identifier: str, float_digits: int | None = 12
) -> str:
    """A query returning the rows on which the table and a recomputation of its SQL differ.

    Symmetric ``EXCEPT ALL`` over the visible columns (set operations compare NULLs as
    equal), with ``_ivm_side`` saying whether the row is ``missing`` from the table or
    ``unexpected`` in it. DOUBLE / FLOAT columns are compared to ``float_digits`` significant
    digits (``None``: exactly). Without state the query returns one row saying so.
    """
    table = _fqn(current_catalog(spark), schema, identifier)
    state = read_state(spark, table) if spark.catalog.tableExists(table) else None
    if state is None:
        note = f"{table} has no duckstream state: it was not built by incremental_ivm"
        return f"SELECT {_literal(note)} AS _ivm_side"
    types = {f.name: f.dataType.typeName() for f in spark.table(table).schema.fields}
    columns = ", ".join(
        f"{_compared(c, types.get(c, ''), float_digits)} AS {_quote(c)}" for c in state.columns
    )
    return (
        f"WITH _ivm_actual AS (SELECT {columns} FROM {table}),\n"
        f"_ivm_expected AS (SELECT {columns} FROM (\n{state.model_sql}\n) AS _ivm_model)\n"
        "SELECT 'missing' AS _ivm_side, * FROM (SELECT * FROM _ivm_expected"
        " EXCEPT ALL SELECT * FROM _ivm_actual) AS _ivm_m\n"
        "UNION ALL\n"
        "SELECT 'unexpected' AS _ivm_side, * FROM (SELECT * FROM _ivm_actual"
        " EXCEPT ALL SELECT * FROM _ivm_expected) AS _ivm_u"
    )


def _compared(column: str, type_name: str, float_digits: int | None) -> str:
    """``column`` as compared: floating point as text with ``float_digits`` significant
    digits (NaN and infinities compare as themselves)."""
    name = _quote(column)
    if float_digits is None or type_name not in _FLOATS:
        return name
    return f"format_string('%.{max(float_digits - 1, 0)}e', CAST({name} AS DOUBLE))"


def current_catalog(spark: SparkSession) -> str:
    """The session's current catalog. ``spark.catalog.currentCatalog()`` is wrong on threads
    other than the session's (``spark_catalog``), and dbt runs models on worker threads."""
    row = spark.sql("SELECT current_catalog()").first()
    assert row is not None
    return str(row[0])


def _timed(outcome: Outcome, started: float) -> Outcome:
    outcome.elapsed_ms = (time.perf_counter() - started) * 1000
    return outcome


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _fqn(*parts: str) -> str:
    return ".".join(_quote(p) for p in parts)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
