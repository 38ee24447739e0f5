"""The Spark + Iceberg backend of the ``incremental_ivm`` materialization.

The decision (build, rebuild or maintain, and why), the state record and the log line are
the engine-independent core's (:mod:`dbt_duckstream`); this module does what only Spark does,
with duckstream's Spark runner (:mod:`duckstream.engines.iceberg.runner`):

* **refresh**: the runner's own flow (:func:`~duckstream.engines.iceberg.runner.begin`
  then :func:`~duckstream.engines.iceberg.runner.finish`, what
  :func:`duckstream.engines.iceberg.runner.refresh` runs): ``auto`` (the default) estimates
  the window from Iceberg metadata and decides again on the view's own measured refreshes,
  and rebuilds in place when that is cheaper or maintaining is impossible; every path's
  commit records when the refresh started (its time, for the next ``auto`` to decide on).
  dbt's conventions on top: ``full`` rebuilds in place only when a source changed; a window
  ``maintain`` cannot read (:class:`RebuildRequired`: a source's schema changed, ...) is
  rebuilt in place (``initialize_cursors``: data and cursors in one commit) and the log
  line says why; a rebuild records the model's state;
* **build**: ``setup`` (create or replace the table, fill it at pinned snapshots, record the
  cursors), or refill in place when the table's columns are unchanged.

The state (:class:`dbt_duckstream.model.State`) lives in table properties of the model's table
(``duckstream.*``; the model SQL base64-encoded). Setting them commits no Iceberg snapshot, so
they never disturb the cursors (kept in the table's snapshot summaries) nor models reading
the table. There is no cursors table on Iceberg (a ``recompute`` drops the
``_ivm_cursors__<model>`` mirror earlier versions kept). Spark has no multi-statement
transactions: a build writes its state after the commit that fills the table.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from dbt.adapters.duckstream_spark.__version__ import version as VERSION
from dbt_duckstream import equivalence
from dbt_duckstream.decide import Compiled, Found
from dbt_duckstream.materialize import Refreshed
from dbt_duckstream.model import ModelRequest, State, plan_hash
from duckstream.clock import at_clock
from duckstream.compiler import compile_ivm
from duckstream.engines.iceberg.runner import begin, fill, finish, setup
from duckstream.engines.iceberg.schema import schema_of
from duckstream.engines.iceberg.steps import changed_sources
from duckstream.engines.iceberg.window import CLOCK_PROPERTY, read_logs
from duckstream.normalize.pin_clock import pin_clock
from duckstream.plan import IVMPlan, Naming

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "duckstream."


class Recording:
    """``spark``, writing down every statement it runs (the SQL a model run ran)."""

    def __init__(self, spark: SparkSession, executed: list[str]) -> None:
        self.spark = spark
        self.executed = executed

    def sql(self, query: str, *args: Any, **kwargs: Any) -> Any:
        self.executed.append(query)
        return self.spark.sql(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.spark, name)


class IcebergBackend:
    """The :class:`dbt_duckstream.materialize.Backend` of a SparkSession whose current catalog
    is an Iceberg catalog."""

    dialect = "spark"
    version = VERSION

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.executed: list[str] = []
        self.recording: Any = Recording(spark, self.executed)
        self.catalog = current_catalog(spark)
        self.engine_phases: list[Any] = []

    def table(self, request: ModelRequest) -> str:
        return _fqn(self.catalog, request.schema, request.identifier)

    def look(self, request: ModelRequest, plan: object | None = None) -> Found:
        table = self.table(request)
        if not self.spark.catalog.tableExists(table):
            return Found(table=False)
        return Found(table=True, state=read_state(self.spark, table))

    def compile(self, request: ModelRequest) -> tuple[IVMPlan, Compiled]:
        view_sql, arguments = self.compile_args(request)
        plan = compile_ivm(
            view_sql,
            naming=Naming(mv_name=request.identifier, cursors_name=request.cursors_name),
            **arguments,
        )
        return plan, Compiled(plan_hash(plan), list(plan.output_columns), request.sql)

    def compile_args(self, request: ModelRequest) -> tuple[str, dict[str, Any]]:
        """The view SQL (the model's) and ``compile_ivm``'s other arguments."""
        return request.sql, {
            "dialect": "spark",
            "mv_name": request.identifier,
            "mv_catalog": self.catalog,
            "mv_schema": request.schema,
            # The sources' columns: ``select *`` over a source expands, and refreshes read
            # only the columns the model uses.
            "schema": schema_of(
                self.spark, request.sql, catalog=self.catalog, schema=request.schema
            ),
            "max_recursion_depth": request.max_recursion_depth,
        }

    def plan_key(self, request: ModelRequest) -> str | None:
        """None: the plan is compiled every run (Spark's own costs dwarf the compile's;
        unmeasured, so not cached yet)."""
        return None

    def plan_depends(self, plan: object) -> object:
        return None

    def same_layout(self, request: ModelRequest, plan: object) -> bool:
        """Whether the table's columns (names and types, hidden ones included) are those the
        plan creates (Spark analyses the plan's query; no job runs)."""
        assert isinstance(plan, IVMPlan)
        create = sqlglot.parse_one(plan.create_mv, dialect="spark")
        query = create.expression if isinstance(create, exp.Create) else None
        if query is None:
            return False
        wanted = self.spark.sql(query.sql(dialect="spark")).schema.fields
        current = self.spark.table(self.table(request)).schema.fields
        return [(f.name, f.dataType.simpleString()) for f in wanted] == [
            (f.name, f.dataType.simpleString()) for f in current
        ]

    def build(
        self, request: ModelRequest, plan: object, state: State, *, replace: bool, reason: str
    ) -> None:
        assert isinstance(plan, IVMPlan)
        if replace:
            setup(self.recording, plan, f"dbt: {reason}")
        else:
            self.recording.sql(plan.create_cursors_table)
            fill(self.recording, plan, f"dbt: {reason}")
        _write_state(self.recording, self.table(request), state)

    def refresh(self, request: ModelRequest, plan: object, state: State) -> Refreshed:
        """The runner's refresh (:func:`duckstream.engines.iceberg.runner.begin` then
        ``finish``: ``auto`` decides on the view's own measured refreshes too, and the
        view's commit records when the refresh started, whichever path ran), with dbt's
        conventions: ``full`` rebuilds only when a source changed, a window ``maintain``
        cannot read rebuilds in place, and a rebuild records the model's state."""
        assert isinstance(plan, IVMPlan)
        pinned = begin(self.recording, plan, request.strategy, estimate_full=True)
        report, chosen = pinned.report, pinned.report.strategy
        auto = "auto: " if request.strategy == "auto" else ""
        values = finish(self.recording, pinned, rebuild=True)
        if report.strategy == "full":
            if chosen == "incremental":  # maintain could not read the window
                why = report.reason
            elif request.strategy == "full":
                why = "ivm_strategy full"
            else:
                why = auto + report.reason
            _write_state(self.recording, self.table(request), state)
            return Refreshed("full", why)
        changed, sources = changed_sources(values)
        if not changed:
            return Refreshed("none", sources=sources)
        reason = auto + report.reason if auto else ""
        return Refreshed("incremental", reason, sources=sources, sources_changed=changed)

    def recompute(self, request: ModelRequest, state_of: Callable[[list[str]], State]) -> None:
        table = self.table(request)
        self.recording.sql(f"CREATE OR REPLACE TABLE {table} USING iceberg AS\n{request.sql}")
        cursors = _fqn(self.catalog, request.schema, request.cursors_name)
        self.recording.sql(f"DROP TABLE IF EXISTS {cursors}")
        _write_state(self.recording, table, state_of(self.spark.table(table).columns))

    def count(self, request: ModelRequest) -> int:
        return self.spark.table(self.table(request)).count()


def read_state(spark: Any, table: str) -> State | None:
    """The duckstream state of ``table`` (its ``duckstream.*`` properties), if it has one."""
    found = {
        str(row[0]).removeprefix(PREFIX): str(row[1])
        for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
        if str(row[0]).startswith(PREFIX)
    }
    try:
        for key in ("model_sql", "view_sql"):
            if key in found:
                found[key] = base64.b64decode(found[key]).decode()
    except ValueError:
        return None
    return State.from_record(found)


def _write_state(spark: Any, table: str, state: State) -> None:
    record = state.record()
    for key in ("model_sql", "view_sql"):
        record[key] = base64.b64encode(record[key].encode()).decode()
    pairs = ", ".join(
        f"{_literal(PREFIX + key)} = {_literal(value)}" for key, value in record.items()
    )
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")


def equivalence_sql(
    spark: SparkSession, schema: str, identifier: str, float_digits: int | None = 12
) -> str:
    """The ``ivm_equivalent`` test's query (:mod:`dbt_duckstream.equivalence`)."""
    table = _fqn(current_catalog(spark), schema, identifier)
    state = read_state(spark, table) if spark.catalog.tableExists(table) else None
    types = (
        {f.name: f.dataType.typeName() for f in spark.table(table).schema.fields}
        if state is not None
        else {}
    )
    if state is not None:  # a model reading the clock: recomputed at its refresh's clock
        view = f"{current_catalog(spark)}.{schema}.{identifier}"
        latest = read_logs(spark, view, [])[view].latest_data_snapshot()
        clock = (latest.summary if latest else {}).get(CLOCK_PROPERTY)
        if clock is not None:
            state = dataclasses.replace(state, model_sql=at_recorded_clock(state.model_sql, clock))
    return equivalence.equivalence_sql(
        table, state, types, dialect="spark", float_digits=float_digits
    )


def at_recorded_clock(view_sql: str, clock: str) -> str:
    """``view_sql`` (Spark SQL) with each time function the value of the recorded ``clock``
    (microseconds since the epoch): the view as its refresh at that clock computed it.

    >>> at_recorded_clock("SELECT k FROM t WHERE d >= current_date() - 7", "1768046400000000")
    'SELECT k FROM t WHERE d >= CAST(TIMESTAMP_MICROS(1768046400000000) AS DATE) - 7'
    """
    instant = exp.Anonymous(this="timestamp_micros", expressions=[exp.Literal.number(clock)])
    marked = pin_clock(sqlglot.parse_one(view_sql, dialect="spark"))
    pinned = at_clock(
        marked,
        lambda kind: exp.cast(instant.copy(), "date") if kind == "current_date" else instant.copy(),
    )
    return pinned.sql(dialect="spark")


def current_catalog(spark: Any) -> str:
    """The session's current catalog. ``spark.catalog.currentCatalog()`` is wrong on threads
    other than the session's (``spark_catalog``), and dbt runs models on worker threads."""
    row = spark.sql("SELECT current_catalog()").first()
    assert row is not None
    return str(row[0])


def _fqn(*parts: str) -> str:
    return ".".join(equivalence.quote(p, "spark") for p in parts)


def _literal(value: str) -> str:
    return equivalence.literal(value, "spark")
