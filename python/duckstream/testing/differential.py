"""The differential harness: a maintained view must equal recomputation, as a multiset.

Used by the test suite on real DuckLake catalogs (and by the Spark suite through the same
``Lakehouse`` interface): create tables, compile a view, set it up, then for each cycle commit
one or more change batches, refresh, and compare ``query_mv`` with the view's SELECT run on
the sources.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import duckdb
import sqlglot
from sqlglot import exp

from duckstream.compiler import compile_ivm
from duckstream.engines.ducklake.names import quote
from duckstream.engines.ducklake.runner import run_statements, without_table_statistics
from duckstream.engines.ducklake.schema import schema_of
from duckstream.normalize.number_rows import break_ties_sql
from duckstream.plan import IVMPlan
from duckstream.runtime import refresh, setup
from duckstream.strategy import Policy


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # SQL type: INTEGER, DECIMAL(10,2), DOUBLE, VARCHAR, DATE, BOOLEAN


@dataclass
class TableSpec:
    name: str
    columns: list[Column]
    rows: list[tuple] = field(default_factory=list)

    def ddl(self, catalog: str, schema: str) -> str:
        cols = ", ".join(f"{quote_ident(c.name)} {c.type}" for c in self.columns)
        return f"CREATE TABLE {catalog}.{schema}.{quote_ident(self.name)} ({cols})"


@dataclass(frozen=True)
class Insert:
    table: str
    rows: tuple[tuple, ...]


@dataclass(frozen=True)
class Delete:
    table: str
    where: str  # SQL predicate over the table's columns


@dataclass(frozen=True)
class Update:
    table: str
    assignments: str  # "a = 1, b = NULL"
    where: str


Change = Insert | Delete | Update
Batch = Sequence[Change]  # one committed transaction
Cycle = Sequence[Batch]  # batches committed between two refreshes


def tables_schema(tables: Iterable[TableSpec]) -> dict[str, dict[str, str]]:
    """The compiler's ``schema=`` for ``tables``: ``{table: {column: type}}``."""
    return {t.name: {c.name: c.type for c in t.columns} for t in tables}


# ``name`` as a quoted SQL identifier: exact case, reserved words and any character
quote_ident = quote


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"'{value}'::DOUBLE"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list | tuple):  # a LIST column's value
        return "[" + ", ".join(sql_literal(v) for v in value) + "]"
    return "'" + str(value).replace("'", "''") + "'"


# Separator of unordered string_agg in generated views; no generated value contains it.
UNORDERED_SEPARATOR = "|"


def normalize_value(value: Any) -> Any:
    """Make results of incremental and full computation comparable: floats are rounded
    (sums over doubles accumulate in another order), exact numbers compare by value."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if value == 0:
            return 0.0
        return float(f"{value:.9g}")
    if isinstance(value, decimal.Decimal):
        return float(f"{float(value):.9g}") if value != value.to_integral_value() else int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, list):  # a LIST column: hashable, its elements compared as above
        return tuple(normalize_value(v) for v in value)
    if isinstance(value, str) and UNORDERED_SEPARATOR in value:
        # string_agg(x, '|') without ORDER BY: the order of its pieces is arbitrary
        return UNORDERED_SEPARATOR.join(sorted(value.split(UNORDERED_SEPARATOR)))
    return value


def as_multiset(rows: Iterable[tuple]) -> Counter:
    return Counter(tuple(normalize_value(v) for v in row) for row in rows)


def multiset_diff(expected: Counter, actual: Counter) -> str:
    missing = expected - actual
    extra = actual - expected
    lines = []
    for row, n in sorted(missing.items(), key=repr)[:10]:
        lines.append(f"  missing x{n}: {row}")
    for row, n in sorted(extra.items(), key=repr)[:10]:
        lines.append(f"  extra   x{n}: {row}")
    return "\n".join(lines)


def same_names(expected: list[str], actual: list[str], view_sql: str) -> bool:
    """Whether ``query_mv``'s column names are the SELECT's. One known difference is allowed:
    DuckDB names an unaliased column (``SELECT amount FROM t``) as its catalog spells it
    (``Amount``), which the compiler cannot know (it names it as the view writes it; Spark
    does the same). Names are case-insensitive on both engines.

    >>> same_names(["Amount"], ["amount"], "SELECT amount FROM t")
    True
    >>> same_names(["Amount"], ["amount"], "SELECT amount AS Amount FROM t")
    False
    """
    if len(expected) != len(actual):
        return False
    view = sqlglot.parse_one(view_sql, dialect="duckdb")
    items = view.expressions if isinstance(view, exp.Select) else []
    if len(items) != len(actual):
        return expected == actual

    def as_written(item: exp.Expr, name: str) -> bool:  # an unaliased column, spelled `name`
        return isinstance(item, exp.Column) and item.this.name == name

    return all(
        e == a or (e.lower() == a.lower() and as_written(item, a))
        for e, a, item in zip(expected, actual, items, strict=True)
    )


def check_result(
    view_sql: str,
    context: str,
    expected: tuple[list[str], list[tuple]],
    actual: tuple[list[str], list[tuple]],
    check_names: bool,
) -> None:
    """Assert ``actual`` (``query_mv``'s names and rows) equals ``expected`` (the SELECT's)."""
    if check_names and not same_names(expected[0], actual[0], view_sql):
        raise AssertionError(
            f"maintained view's column names differ from the SELECT's {context}\n"
            f"view: {view_sql}\n  SELECT:   {expected[0]}\n  query_mv: {actual[0]}"
        )
    want, got = as_multiset(expected[1]), as_multiset(actual[1])
    if want != got:
        raise AssertionError(
            f"maintained view differs from recomputation {context}\n"
            f"view: {view_sql}\n{multiset_diff(want, got)}"
        )


# ``compile_kwargs={"schema": FROM_CATALOG}``: the harness reads the tables' columns from its
# catalog with ``schema_of`` once they exist, as a user of the Python API would.
FROM_CATALOG: Any = object()


class Lakehouse(Protocol):
    """What :func:`run_scenario` needs from an engine's harness (DuckLake, Spark + Iceberg)."""

    def create(self, table: TableSpec) -> None: ...
    def apply(self, batch: Batch) -> None: ...
    def compile(self, view_sql: str, mv_name: str = "mv", **kwargs: Any) -> IVMPlan: ...
    def setup(self, plan: IVMPlan) -> None: ...
    def refresh(self, plan: IVMPlan) -> None: ...
    def rows(self, sql: str) -> list[tuple]: ...
    def check(self, plan: IVMPlan, view_sql: str, context: str = "") -> None: ...


class DuckLakeHarness:
    """Tables and views on a DuckDB connection with a DuckLake catalog attached."""

    def __init__(
        self,
        con: Any,
        catalog: str = "dl",
        schema: str = "main",
        placement: dict[str, str] | None = None,
        strategy: str = "incremental",
        check_names: bool = False,
        policy: Policy | None = None,
    ) -> None:
        """``placement``: tables kept in another attached catalog than the view's (same
        schema name); views name tables unqualified, as if they all were in ``catalog``.
        ``strategy``: how :meth:`refresh` refreshes (the tests are about ``incremental``);
        ``policy``: auto's cost model (None: the default).
        ``check_names``: :meth:`check` also compares the output column names."""
        self.con = con
        self.catalog = catalog
        self.schema = schema
        self.placement = placement or {}
        self.strategy = strategy
        self.policy = policy
        self.check_names = check_names

    def fqn(self, table: str) -> str:
        return f"{self.placement.get(table, self.catalog)}.{self.schema}.{quote_ident(table)}"

    def rename(self, table: str, new_name: str) -> None:
        """``ALTER TABLE table RENAME TO new_name`` (its own snapshot); placement follows."""
        self.con.execute(f"ALTER TABLE {self.fqn(table)} RENAME TO {quote_ident(new_name)}")
        if table in self.placement:
            self.placement[new_name] = self.placement.pop(table)

    def create(self, table: TableSpec) -> None:
        self.con.execute(table.ddl(self.placement.get(table.name, self.catalog), self.schema))
        if table.rows:
            self.apply([Insert(table.name, tuple(table.rows))])

    def _statement(self, change: Change) -> str | None:
        if isinstance(change, Insert):
            if not change.rows:
                return None
            values = ", ".join(
                "(" + ", ".join(sql_literal(v) for v in row) + ")" for row in change.rows
            )
            return f"INSERT INTO {self.fqn(change.table)} VALUES {values}"
        if isinstance(change, Delete):
            return f"DELETE FROM {self.fqn(change.table)} WHERE {change.where}"
        return f"UPDATE {self.fqn(change.table)} SET {change.assignments} WHERE {change.where}"

    def apply(self, batch: Batch) -> None:
        """Commit ``batch`` as one transaction (one snapshot) per catalog it writes to: DuckDB
        writes one attached database per transaction."""
        by_catalog: dict[str, list[str]] = {}
        for change in batch:
            statement = self._statement(change)
            if statement:
                catalog = self.placement.get(change.table, self.catalog)
                by_catalog.setdefault(catalog, []).append(statement)
        for statements in by_catalog.values():
            run_statements(self.con, ["BEGIN TRANSACTION", *statements, "COMMIT"])

    def compile(self, view_sql: str, mv_name: str = "mv", **kwargs: Any) -> IVMPlan:
        if kwargs.get("schema") is FROM_CATALOG:
            kwargs["schema"] = schema_of(
                self.con, view_sql, catalog=self.catalog, schema=self.schema
            )
        if self.placement:
            kwargs.setdefault(
                "sources",
                {t: {"catalog": c, "schema": self.schema} for t, c in self.placement.items()},
            )
        return compile_ivm(
            view_sql, mv_name=mv_name, mv_catalog=self.catalog, mv_schema=self.schema, **kwargs
        )

    def setup(self, plan: IVMPlan) -> None:
        setup(self.con, plan)

    def refresh(self, plan: IVMPlan) -> None:
        refresh(self.con, plan, strategy=self.strategy, policy=self.policy)

    def rows(self, sql: str) -> list[tuple]:
        """``sql``'s rows, unqualified tables found where they are kept."""
        return self.result(sql)[1]

    def result(self, sql: str) -> tuple[list[str], list[tuple]]:
        """``sql``'s column names (as DuckDB reports them) and rows."""
        return self._run(sql, list(dict.fromkeys([self.catalog, *self.placement.values()])))

    def _run(self, sql: str, catalogs: list[str]) -> tuple[list[str], list[tuple]]:
        """``sql``'s column names and rows, its unqualified tables looked up in the schema
        of ``catalogs``, in order (the first also the current one)."""
        path = ",".join(f"{c}.{self.schema}" for c in catalogs)
        self.con.execute(f"USE {catalogs[0]}.{self.schema}")
        self.con.execute(f"SET search_path = '{path}'")
        try:
            cursor = self.con.execute(sql)
            return [d[0] for d in cursor.description], cursor.fetchall()
        finally:
            self.con.execute("USE memory.main")
            self.con.execute("RESET search_path")

    def check(self, plan: IVMPlan, view_sql: str, context: str = "") -> None:
        """Assert the view's table equals recomputation as a multiset (and, with
        ``check_names``, has the SELECT's column names)."""
        mv_names, mv_rows = self.result(plan.query_mv)
        # a view that chooses among tied rows: recompute the choice the plan maintains
        names, rows = self.recompute(break_ties_sql(view_sql, "duckdb", len(mv_names)))
        check_result(view_sql, context, (names, rows), (mv_names, mv_rows), self.check_names)

    def recompute(self, sql: str) -> tuple[list[str], list[tuple]]:
        """:meth:`result` of ``sql`` over in-memory copies of the lake tables it names, with
        DuckDB's optimizer as the user has it: the oracle is the data's answer.

        Not over the lake itself: DuckLake 1.5.5 can record wrong table statistics, which
        statistics propagation trusts (:func:`~duckstream.engines.ducklake.runner.
        without_table_statistics`), and with statistics propagation off DuckDB 1.5.5 answers
        ``SELECT ... FROM (SELECT DISTINCT ON (g) ... ORDER BY g, k NULLS FIRST) AS s JOIN u
        ON u.k = s.k`` wrongly, now and then (it takes a row ordered after the first:
        ``tests/test_regressions_ducklake.py``). Copies of the tables get DuckDB's own
        statistics. Catalog-qualified names are pointed at the copies too; a name with no
        copy (a view) resolves in the lake as before."""
        catalogs = list(dict.fromkeys([self.catalog, *self.placement.values()]))
        copies = {c.lower(): f"_ivm_oracle_{c}" for c in catalogs}
        parsed = sqlglot.parse_one(sql, dialect="duckdb")
        ctes = {c.alias_or_name.lower() for c in parsed.find_all(exp.CTE)}
        tables = {
            (t.catalog.lower(), t.db or self.schema, t.name)
            for t in parsed.find_all(exp.Table)
            if t.name and t.name.lower() not in ctes
        }
        columns = _columns_spelled(parsed)
        for copy in copies.values():
            self.con.execute(f"ATTACH ':memory:' AS {copy}")
        try:
            with without_table_statistics(self.con):  # a plain scan; untrusted all the same
                for catalog, schema, name in sorted(tables):
                    for source in [catalog] if catalog else catalogs:
                        if source.lower() in copies and self._copy(
                            f"{source}.{quote(schema)}.{quote(name)}",
                            f"{copies[source.lower()]}.{quote(schema)}",
                            quote(name),
                            columns,
                        ):
                            break

            def to_copies(node: exp.Expr) -> exp.Expr:
                if isinstance(node, exp.Table) and node.catalog.lower() in copies:
                    node.set("catalog", exp.to_identifier(copies[node.catalog.lower()]))
                return node

            return self._run(
                parsed.transform(to_copies).sql(dialect="duckdb"),
                [copies[c.lower()] for c in catalogs] + catalogs,
            )
        finally:
            for copy in copies.values():
                self.con.execute(f"DETACH {copy}")

    def _copy(self, source: str, schema: str, name: str, columns: list[str] | None) -> bool:
        """Copy ``source`` (its ``columns`` of them, None: all) to ``schema.name``; False when
        there is no such table."""
        if columns is None:
            selected = "*"
        else:  # by name, whatever the case: COLUMNS(lambda) needs no catalog read
            selected = f"COLUMNS(c -> list_contains({sql_literal(columns)}, lower(c)))"
        try:
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            self.con.execute(f"CREATE TABLE {schema}.{name} AS SELECT {selected} FROM {source}")
        except duckdb.CatalogException:
            return False
        except duckdb.BinderException:  # none of its columns is spelled: a count(*) of it
            self.con.execute(f"CREATE TABLE {schema}.{name} AS SELECT * FROM {source}")
        return True


def _columns_spelled(query: exp.Expr) -> list[str] | None:
    """Every name ``query`` spells (a superset of the columns it reads: copying a wide table
    whole costs more than the query), or None when it may read columns it does not name (a
    ``*`` other than EXISTS's, a NATURAL join, COLUMNS(...))."""
    for star in query.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Column) or (
            isinstance(parent, exp.Select) and not isinstance(parent.parent, exp.Exists)
        ):
            return None
    if any(j.args.get("method") for j in query.find_all(exp.Join)) or query.find(exp.Columns):
        return None
    return sorted({i.name.lower() for i in query.find_all(exp.Identifier)})


@dataclass
class Scenario:
    """A hand-written case: tables, a view, its change windows, and what an engine may
    legitimately do instead of maintaining it."""

    tables: list[TableSpec]
    view: str
    cycles: list[Cycle]
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    names: list[str] | None = None  # the output column names, when they are the point
    spark_refused: str | None = None  # the feature Spark refuses, on purpose
    spark_gap: str | None = None  # why the Spark suite cannot run it yet (expected to fail)

    def run(self, harness: Lakehouse) -> IVMPlan:
        return run_scenario(harness, self.tables, self.view, self.cycles, **self.compile_kwargs)


def run_scenario(
    harness: Lakehouse,
    tables: Sequence[TableSpec],
    view_sql: str,
    cycles: Sequence[Cycle],
    **compile_kwargs: Any,
) -> IVMPlan:
    """Create ``tables``, maintain ``view_sql`` through ``cycles``, check after every refresh."""
    for table in tables:
        harness.create(table)
    plan = harness.compile(view_sql, **compile_kwargs)
    harness.setup(plan)
    harness.check(plan, view_sql, "after setup")
    for n, cycle in enumerate(cycles, 1):
        for batch in cycle:
            harness.apply(batch)
        harness.refresh(plan)
        harness.check(plan, view_sql, f"after refresh {n}")
    return plan


# The paths users run, for a DuckLake scenario: forced incremental compiled without and with
# ``schema=`` (as dbt compiles), and ``auto`` with it (``pytest.mark.parametrize`` ids beside).
DUCKLAKE_PATHS = [("incremental", None), ("incremental", FROM_CATALOG), ("auto", FROM_CATALOG)]
DUCKLAKE_PATH_IDS = ["incremental", "incremental-schema", "auto-schema"]


def run_on_ducklake(directory: str, scenario: Scenario, strategy: str, schema: Any) -> IVMPlan:
    """``scenario`` on a new DuckLake in ``directory`` (inlining off), by one of
    :data:`DUCKLAKE_PATHS`."""
    from duckstream.testing.ducklake import connect_ducklake

    con = connect_ducklake(directory, "dl", 0)
    try:
        harness = DuckLakeHarness(con, check_names=True, strategy=strategy)
        kwargs = {"schema": schema} if schema is not None else {}
        return run_scenario(harness, scenario.tables, scenario.view, scenario.cycles, **kwargs)
    finally:
        con.close()
