"""The differential harness on Spark + Iceberg: same interface as ``DuckLakeHarness``.

Views and change predicates are written once, in DuckDB's SQL (the test suite's), and
transpiled to Spark SQL with sqlglot, so one scenario runs on both engines. Each harness
works in its own Iceberg namespace, so tests can share one Spark session and warehouse
without dropping tables (DROP is slow and not needed). Differences from DuckLake a test
may notice: every change statement is its own commit (Spark has no multi-statement
transactions), and a table created without rows has no snapshot until it is first written
(setup gives it one).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from duckstream.compiler import compile_ivm
from duckstream.engines.iceberg.runner import refresh, setup
from duckstream.engines.iceberg.schema import schema_of
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.plan import IVMPlan
from duckstream.testing.differential import (
    FROM_CATALOG,
    Batch,
    Change,
    Cycle,
    Insert,
    Scenario,
    TableSpec,
    Update,
    check_result,
    quote_ident,
    sql_literal,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_namespaces = itertools.count(1)
_RUN = uuid.uuid4().hex[:6]  # namespaces of earlier runs may still be in the warehouse


def to_spark(sql: str, read: str = "duckdb") -> str:
    """Transpile one statement (or predicate) to Spark SQL, as duckstream writes it (a
    series in FROM as Spark's ``range``: sqlglot's Spark explodes a sequence, wrongly aliased)."""
    from duckstream.engines.iceberg.dialect import DIALECT

    return sqlglot.transpile(sql, read=read, write=DIALECT)[0]


def spark_ident(name: str) -> str:
    """``name`` for Spark SQL, in backticks unless it is a plain lower-case name (any case,
    reserved words, any character); plain names stay bare so that they read as the catalog
    reports them (``lake.ns.t``, the key of a cursor)."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in {"group", "order", "select"}:
        return name
    return exp.to_identifier(name, quoted=True).sql("spark")


def spark_literal(value: Any) -> str:
    """A value as a Spark SQL literal: a list as ``array(...)`` (Spark reads no ``[...]``)."""
    if isinstance(value, list | tuple):
        return "array(" + ", ".join(spark_literal(v) for v in value) + ")"
    return sql_literal(value)


def spark_type(type_: str) -> str:
    return exp.DataType.build(type_, dialect="duckdb").sql("spark")


class SparkHarness:
    """Tables and views in an Iceberg namespace ``catalog.schema`` of a Spark session."""

    def __init__(
        self,
        spark: SparkSession,
        catalog: str = "lake",
        schema: str | None = None,
        check_names: bool = False,
    ) -> None:
        """``check_names``: :meth:`check` also compares the output column names."""
        self.spark = spark
        self.catalog = catalog
        self.check_names = check_names
        self.schema = schema or f"ds_{_RUN}_{next(_namespaces)}"
        self.tables: dict[str, TableSpec] = {}
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{self.schema}")

    def fqn(self, table: str) -> str:
        return f"{self.catalog}.{self.schema}.{spark_ident(table)}"

    def create(self, table: TableSpec) -> None:
        columns = ", ".join(f"{spark_ident(c.name)} {spark_type(c.type)}" for c in table.columns)
        self.spark.sql(f"CREATE TABLE {self.fqn(table.name)} ({columns}) USING iceberg")
        self.tables[table.name] = table
        if table.rows:  # none: no snapshot until the first write (setup gives it one)
            self.apply([Insert(table.name, tuple(table.rows))])

    def _statement(self, change: Change) -> str | None:
        table = self.fqn(change.table)
        if isinstance(change, Insert):
            if not change.rows:
                return None
            types = [spark_type(c.type) for c in self.tables[change.table].columns]
            values = ", ".join(
                "("
                + ", ".join(
                    f"CAST({spark_literal(v)} AS {t})" for v, t in zip(row, types, strict=True)
                )
                + ")"
                for row in change.rows
            )
            return f"INSERT INTO {table} VALUES {values}"
        # Assignments and predicates are DuckDB SQL: transpile them with the table named in
        # DuckDB's quoting (backticks do not parse as DuckDB).
        duck = f"{self.catalog}.{self.schema}.{quote_ident(change.table)}"
        if isinstance(change, Update):
            return to_spark(f"UPDATE {duck} SET {change.assignments} WHERE {change.where}")
        return to_spark(f"DELETE FROM {duck} WHERE {change.where}")

    def apply(self, batch: Batch) -> None:
        """Commit ``batch``: one Iceberg snapshot per change."""
        for change in batch:
            if statement := self._statement(change):
                self.spark.sql(statement)

    def compile(self, view_sql: str, mv_name: str = "mv", **kwargs: Any) -> IVMPlan:
        if "distinct on" in view_sql.lower():
            # sqlglot writes DISTINCT ON for Spark as ROW_NUMBER() over the ORDER BY alone,
            # which picks any of the tied rows: break the ties as the recomputation does
            view_sql = break_ties_sql(view_sql, "duckdb")
        if kwargs.get("schema") is FROM_CATALOG:
            kwargs["schema"] = schema_of(
                self.spark, to_spark(view_sql), catalog=self.catalog, schema=self.schema
            )
        return compile_ivm(
            to_spark(view_sql),
            dialect="spark",
            mv_name=mv_name,
            mv_catalog=self.catalog,
            mv_schema=self.schema,
            **kwargs,
        )

    def setup(self, plan: IVMPlan) -> None:
        setup(self.spark, plan)

    def refresh(self, plan: IVMPlan) -> None:
        """Maintain the view (never the cost-based choice: on test-sized tables a rebuild is
        always cheaper, and these tests are about maintenance)."""
        refresh(self.spark, plan, strategy="incremental")

    def rows(self, sql: str) -> list[tuple]:
        """Run Spark SQL with this harness's namespace as the current one."""
        return self.result(sql)[1]

    def result(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Spark SQL's column names and rows, this harness's namespace the current one."""
        self.spark.sql(f"USE {self.catalog}.{self.schema}")
        frame = self.spark.sql(sql)
        return list(frame.columns), [tuple(row) for row in frame.collect()]

    def check(self, plan: IVMPlan, view_sql: str, context: str = "") -> None:
        """Assert the view's table equals recomputation (the view run on Spark; a recursive
        one on DuckDB, :meth:`recomputed_on_duckdb`) as a multiset (and, with
        ``check_names``, has the SELECT's column names)."""
        actual = self.result(plan.query_mv)
        if recursive(view_sql):
            expected = self.recomputed_on_duckdb(view_sql)
        else:  # a view that chooses among tied rows: recompute the choice the plan maintains
            expected = self.result(to_spark(break_ties_sql(view_sql, "duckdb", len(actual[0]))))
        check_result(view_sql, context, expected, actual, self.check_names)

    def recomputed_on_duckdb(self, view_sql: str) -> tuple[list[str], list[tuple]]:
        """The view's column names and rows, recomputed by DuckDB over the tables' current
        rows: Spark 3.5 has no ``WITH RECURSIVE`` to recompute a recursive view with (and
        duckstream's own iteration would be no independent oracle)."""
        import duckdb

        con = duckdb.connect()
        try:
            for name, spec in self.tables.items():
                columns = ", ".join(f"{quote_ident(c.name)} {c.type}" for c in spec.columns)
                con.execute(f"CREATE TABLE {quote_ident(name)} ({columns})")
                rows = self.rows(f"SELECT * FROM {self.fqn(name)}")
                if rows:
                    marks = ", ".join("?" for _ in spec.columns)
                    con.executemany(f"INSERT INTO {quote_ident(name)} VALUES ({marks})", rows)
            cursor = con.execute(view_sql)
            return [d[0] for d in cursor.description], cursor.fetchall()
        finally:
            con.close()


# -- how much of the matrix a run covers ---------------------------------------------------
# The delta rules are engine-independent and proven on DuckLake (milliseconds a refresh); on
# Spark a refresh costs seconds. By default the Spark suite proves what can differ between the
# engines (SQL rendering, types, NULL and DECIMAL semantics, Iceberg's feeds and commits) on a
# representative scenario of each kind over a few windows; DUCKSTREAM_SPARK_ALL=1 (``make
# test-spark-all``) runs every scenario through every window.
def recursive(view_sql: str) -> bool:
    """Whether the view (DuckDB SQL) has a ``WITH RECURSIVE``."""
    parsed = sqlglot.parse_one(view_sql, read="duckdb")
    return any(w.args.get("recursive") for w in parsed.find_all(exp.With))


def spark_all() -> bool:
    """``DUCKSTREAM_SPARK_ALL`` is set: the full Spark matrix."""
    return bool(os.environ.get("DUCKSTREAM_SPARK_ALL"))


def spark_windows() -> int | None:
    """How many change windows a scenario is maintained through on Spark (``fewer_windows``):
    every one under ``DUCKSTREAM_SPARK_ALL``, else ``DUCKSTREAM_SPARK_WINDOWS`` (default 3)."""
    if spark_all():
        return None
    return int(os.environ.get("DUCKSTREAM_SPARK_WINDOWS", "3"))


def chosen(scenarios: Collection[str], default: Collection[str]) -> list[str]:
    """The scenario names a module runs: all of ``scenarios`` under ``DUCKSTREAM_SPARK_ALL``,
    else ``default`` (each must still be a scenario: a renamed one fails loudly)."""
    if spark_all():
        return sorted(scenarios)
    unknown = sorted(set(default) - set(scenarios))
    if unknown:
        raise ValueError(f"no such scenarios: {unknown}")
    return sorted(default)


def fewer_windows(cycles: Sequence[Cycle], windows: int | None) -> list[Cycle]:
    """``cycles`` as at most ``windows`` windows, every change kept: the first windows merged
    into one, the last ``windows - 1`` as they are (where scenarios put their edge cases: a
    table emptied, a group gone, rows back). The view is then checked at fewer states, but
    every change still goes through Iceberg's change feed and the delta rules.

    >>> fewer_windows([[["a"]], [["b"]], [], [["c"], ["d"]], [["e"]]], 3)
    [[['a'], ['b']], [['c'], ['d']], [['e']]]
    >>> fewer_windows([[["a"]], [["b"]]], 3)
    [[['a']], [['b']]]
    """
    if windows is None or len(cycles) <= windows:
        return list(cycles)
    if windows < 1:
        raise ValueError("a scenario needs at least one window")
    head = len(cycles) - windows + 1
    return [[batch for cycle in cycles[:head] for batch in cycle], *cycles[head:]]


# -- fixed scenarios, several at once ------------------------------------------------------
def scenario_outcomes(
    spark: SparkSession,
    scenarios: Mapping[str, Scenario],
    names: list[str],
    threads: int = 3,
    check_types: bool = False,
    windows: int | None = None,
) -> dict[str, BaseException | None]:
    """Maintain each named scenario (``tables``, ``view``, ``cycles``, ``compile_kwargs``,
    ``names``: the output names when they are the point) in its own harness, checked after
    every refresh, and compare ``query_mv``'s column names (and, with ``check_types``, Spark's
    types) with the view's. The scenarios run in parallel threads, each in its own session of
    the one Spark context (``USE`` is per session). ``windows``: maintain each through at most
    that many windows (``fewer_windows``; a known gap keeps all of its windows, so that it
    still fails). Returns what each raised, or ``None``."""
    harnesses = {name: SparkHarness(spark.newSession()) for name in names}

    def run(name: str) -> BaseException | None:
        scenario, harness = scenarios[name], harnesses[name]
        if scenario.spark_gap is None:
            scenario = dataclasses.replace(scenario, cycles=fewer_windows(scenario.cycles, windows))
        try:
            plan = scenario.run(harness)
            session = harness.spark
            session.sql(f"USE {harness.catalog}.{harness.schema}")
            mv = session.sql(plan.query_mv)
            if recursive(scenario.view):  # Spark cannot run it: DuckDB names its columns
                names = harness.recomputed_on_duckdb(scenario.view)[0]
                assert mv.columns == names, f"query_mv names {mv.columns}, the view's {names}"
                return None
            view = session.sql(to_spark(scenario.view))
            assert mv.columns == view.columns, (
                f"query_mv names {mv.columns}, the view's {view.columns}"
            )
            if scenario.names is not None:
                assert mv.columns == scenario.names, (
                    f"query_mv names {mv.columns}, expected {scenario.names}"
                )
            if check_types:
                types = [f.dataType.simpleString() for f in mv.schema]
                expected = [f.dataType.simpleString() for f in view.schema]
                assert types == expected, f"query_mv types {types}, the view's {expected}"
        except BaseException as error:  # noqa: BLE001 - reported by the scenario's own test
            return error
        return None

    # A refusal is a compile error, reported as the scenario's outcome like any other.
    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(names, pool.map(run, names), strict=True))


def selected_params(request: Any, param: str) -> list[str]:
    """The values of the parameter ``param`` of the tests of ``request``'s module that pytest
    selected (``-k``): a module fixture runs only what will be asked for."""
    return [
        item.callspec.params[param]
        for item in request.session.items
        if item.nodeid.startswith(request.node.nodeid) and hasattr(item, "callspec")
    ]


def expect_outcome(scenario: Scenario, error: BaseException | None) -> None:
    """Assert a scenario's outcome: refused with ``spark_refused``'s feature, a known gap
    (``spark_gap``: it must still fail, then xfail), or passed."""
    import pytest

    from duckstream.errors import UnsupportedSQLError

    if scenario.spark_refused is not None:
        assert isinstance(error, UnsupportedSQLError), error
        assert error.feature == scenario.spark_refused
        return
    if scenario.spark_gap is not None:
        assert error is not None, f"passes on Spark now: drop its spark_gap ({scenario.spark_gap})"
        pytest.xfail(scenario.spark_gap)
    if error is not None:
        raise error
