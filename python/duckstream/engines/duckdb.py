"""DuckDB + DuckLake.

Run-time values live in DuckDB session variables (``SET VARIABLE`` / ``getvariable``): table
functions and ``AT (VERSION => ...)`` accept them where they refuse subqueries, and a guard
``WHERE getvariable('...')`` that is false lets the optimizer drop a whole delta term, so a
source that did not change costs nothing. ``maintain`` is one transaction: DuckLake gives it
snapshot isolation, and the window is pinned explicitly on top of that.
"""

from __future__ import annotations

from sqlglot import exp, parse_one

from duckstream.engines.base import MULT, Engine, Source, Version


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class DuckLakeEngine(Engine):
    dialect = "duckdb"

    # -- run-time values -------------------------------------------------------------------
    def _var(self, name: str) -> str:
        return f"_ivm_{self.slug()}_{name}"

    def runtime_value(self, name: str) -> exp.Expr:
        return exp.Anonymous(this="getvariable", expressions=[exp.Literal.string(self._var(name))])

    def set_runtime_value(self, name: str, query: exp.Expr) -> str:
        return f"SET VARIABLE {self._var(name)} = ({query.sql(dialect='duckdb')})"

    def _end(self, catalog: str) -> exp.Expr:
        return self.runtime_value(f"end_{catalog}")

    def _cursor(self, source: Source) -> exp.Expr:
        return self.runtime_value(f"cursor_{source.index}")

    def changed(self, source: Source) -> exp.Expr:
        return self.runtime_value(f"changed_{source.index}")

    def any_changed(self) -> exp.Expr:
        return self.runtime_value("changed")

    # -- relations -------------------------------------------------------------------------
    def state(self, source: Source, version: Version) -> exp.Expr:
        select = exp.select("*")
        table = source.table()
        if version is not Version.CURRENT:
            at = self._end(source.catalog) if version is Version.NEW else self._cursor(source)
            table.set("when", exp.HistoricalData(this="AT", kind="VERSION", expression=at))
        return select.from_(table)

    def changes(self, source: Source) -> exp.Expr:
        def read(function: str, sign: int) -> exp.Select:
            call = exp.Anonymous(
                this=function,
                expressions=[
                    exp.Literal.string(source.catalog),
                    exp.Literal.string(source.schema),
                    exp.Literal.string(source.name),
                    exp.Add(this=self._cursor(source), expression=exp.Literal.number(1)),
                    self._end(source.catalog),
                ],
            )
            mult = exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))
            return exp.select("*", exp.alias_(mult, MULT)).from_(exp.Table(this=call))

        return exp.union(
            read("ducklake_table_insertions", 1),
            read("ducklake_table_deletions", -1),
            distinct=False,
        )

    # -- statements ------------------------------------------------------------------------
    def create_cursors_table(self) -> str:
        return (
            f"CREATE TABLE IF NOT EXISTS {self.tgt.cursors_fqn} ("
            "mv_name VARCHAR, source_table VARCHAR, table_id BIGINT, last_snapshot BIGINT)"
        )

    def begin(self) -> list[str]:
        return ["BEGIN TRANSACTION"]

    def commit(self) -> list[str]:
        return ["COMMIT"]

    def _catalogs(self) -> list[str]:
        return sorted({s.catalog for s in self.sources} | {self.tgt.catalog})

    def _pin_ends(self) -> list[str]:
        return [
            self.set_runtime_value(
                f"end_{c}", parse_one(f"SELECT max(snapshot_id) FROM ducklake_snapshots({_lit(c)})")
            )
            for c in self._catalogs()
        ]

    def _table_id(self, source: Source) -> str:
        meta = f"__ducklake_metadata_{source.catalog}"
        return (
            f"SELECT t.table_id FROM {meta}.ducklake_table AS t"
            f" JOIN {meta}.ducklake_schema AS s ON t.schema_id = s.schema_id"
            f" WHERE s.schema_name = {_lit(source.schema)} AND t.table_name = {_lit(source.name)}"
            " AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL"
        )

    def pin_for_initialize(self) -> list[str]:
        statements = self._pin_ends()
        for s in self.sources:
            statements.append(
                f"SELECT CASE WHEN ({self._table_id(s)}) IS NULL THEN error("
                f"{_lit(f'duckstream: source table {s.fqn} does not exist')}) END"
            )
            end = self._end(s.catalog).sql("duckdb")
            statements.append(f"SET VARIABLE {self._var(f'cursor_{s.index}')} = {end}")
        return statements

    def record_cursors(self) -> list[str]:
        mv = _lit(self.tgt.name)
        statements = [f"DELETE FROM {self.tgt.cursors_fqn} WHERE mv_name = {mv}"]
        for s in self.sources:
            end = self._end(s.catalog).sql("duckdb")
            statements.append(
                f"INSERT INTO {self.tgt.cursors_fqn} (mv_name, source_table, table_id,"
                f" last_snapshot) VALUES ({mv}, {_lit(s.fqn)}, ({self._table_id(s)}), {end})"
            )
        return statements

    def pin_window(self) -> list[str]:
        """Pin the end snapshots, then read this view's cursors once (a DuckLake read costs
        tens of milliseconds; the temp copy costs nothing) and check them in one statement."""
        mv = _lit(self.tgt.name)
        window = self.temp_table(f"_ivm_{self.slug()}_window").sql("duckdb")
        rows = []
        for s in self.sources:
            cursor, end = "c.last_snapshot", self._end(s.catalog).sql("duckdb")
            table_id = "CAST(c.table_id AS VARCHAR)"
            snapshots = f"ducklake_snapshots({_lit(s.catalog)})"
            in_window = f"FROM {snapshots} AS w WHERE w.snapshot_id > {cursor}"
            in_window += f" AND w.snapshot_id <= {end}"
            rows.append(
                f"SELECT {s.index} AS source, {_lit(s.fqn)} AS source_table,"
                f" c.last_snapshot AS cursor_snapshot, c.table_id,"
                f" EXISTS (SELECT 1 FROM {snapshots} AS w WHERE w.snapshot_id = {cursor})"
                " AS cursor_exists,"
                f" EXISTS (SELECT 1 {in_window} AND (list_contains(coalesce("
                f"w.changes['tables_altered'], []), {table_id}) OR list_contains(coalesce("
                f"w.changes['tables_dropped'], []), {table_id}))) AS altered,"
                f" EXISTS (SELECT 1 {in_window} AND list_contains("
                f"flatten(map_values(w.changes)), {table_id})) AS changed"
                f" FROM {self.tgt.cursors_fqn} AS c"
                f" WHERE c.mv_name = {mv} AND c.source_table = {_lit(s.fqn)}"
            )
        statements = self._pin_ends()
        statements.append(f"CREATE OR REPLACE TEMP TABLE {window} AS {' UNION ALL '.join(rows)}")
        expected = len(self.sources)
        problem = (
            f"SELECT CASE"
            f" WHEN (SELECT count(DISTINCT source) FROM {window}) <> {expected}"
            f" OR (SELECT count(*) FROM {window}) <> {expected}"
            " THEN 'no single cursor for every source (initialize the view)'"
            f" WHEN EXISTS (SELECT 1 FROM {window} WHERE NOT cursor_exists)"
            f" THEN 'cursor snapshot of ' || (SELECT min(source_table) FROM {window}"
            " WHERE NOT cursor_exists) || ' was expired'"
            f" WHEN EXISTS (SELECT 1 FROM {window} WHERE altered)"
            f" THEN 'source ' || (SELECT min(source_table) FROM {window} WHERE altered)"
            " || ' was altered or recreated' END"
        )
        statements.append(
            "SELECT error('duckstream: rebuild required: ' || problem)"
            f" FROM ({problem}) AS p(problem) WHERE problem IS NOT NULL"
        )
        for s in self.sources:
            for name, column in (
                (f"cursor_{s.index}", "cursor_snapshot"),
                (f"changed_{s.index}", "changed"),
            ):
                statements.append(
                    self.set_runtime_value(
                        name, parse_one(f"SELECT {column} FROM {window} WHERE source = {s.index}")
                    )
                )
        any_changed = " OR ".join(self.changed(s).sql("duckdb") for s in self.sources) or "false"
        statements.append(f"SET VARIABLE {self._var('changed')} = ({any_changed})")
        return statements

    def advance_cursors(self) -> list[str]:
        """One UPDATE for all sources (each DuckLake statement has a fixed cost)."""
        mv = _lit(self.tgt.name)
        if not self.sources:
            return []
        ends = " ".join(
            f"WHEN {_lit(s.fqn)} THEN {self._end(s.catalog).sql('duckdb')}" for s in self.sources
        )
        names = ", ".join(_lit(s.fqn) for s in self.sources)
        return [
            f"UPDATE {self.tgt.cursors_fqn} SET last_snapshot = CASE source_table {ends} END"
            f" WHERE mv_name = {mv} AND source_table IN ({names})"
            f" AND {self.any_changed().sql('duckdb')}"
        ]

    def create_temp(self, name: str, query: exp.Expr) -> str:
        return f"CREATE OR REPLACE TEMP TABLE {name} AS {query.sql(dialect='duckdb')}"

    def temp_table(self, name: str) -> exp.Table:
        return exp.table_(name, db="main", catalog="temp")

    def copies(self, mult: exp.Expr) -> exp.Expr:
        return exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[mult])])

    def replace_rows(
        self, keys: list[str], removed: exp.Query, added: exp.Query, columns: list[str]
    ) -> list[str]:
        match = (
            exp.and_(
                *(
                    exp.NullSafeEQ(
                        this=exp.column(k, table="_ivm_k", quoted=True),
                        expression=exp.column(k, table="_ivm_t", quoted=True),
                    )
                    for k in keys
                )
            )
            if keys
            else exp.true()
        )
        gone = exp.Exists(this=exp.select("1").from_(exp.paren(removed).as_("_ivm_k")).where(match))
        names = ", ".join(exp.to_identifier(c, quoted=True).sql("duckdb") for c in columns)
        mv = self.tgt.fqn
        return [
            f"DELETE FROM {mv} AS _ivm_t WHERE {gone.sql('duckdb')}",
            f"INSERT INTO {mv} ({names}) {added.sql('duckdb')}",
        ]

    def fresh_row_ids_base(self) -> exp.Expr:
        # The MV catalog's snapshot at the start of this refresh, shifted left 32 bits: every
        # refresh that inserts commits a new snapshot, so the next base is larger.
        return exp.Mul(
            this=exp.cast(self._end(self.tgt.catalog), exp.DataType.build("bigint")),
            expression=exp.Literal.number(4294967296),
        )
