"""Spark + Apache Iceberg.

What differs from DuckDB + DuckLake, and how this engine deals with it:

- **Literals only.** ``VERSION AS OF`` and ``CALL`` arguments accept no subquery, variable or
  parameter, and Spark 3.5 has no session variables. Run-time values (pinned snapshots,
  cursors, "did this source change") are therefore ``${duckstream.<view>.<name>}``
  placeholders, filled in by a small runner (:mod:`duckstream.engines.iceberg.steps`) from the
  plan's own value queries (:class:`~duckstream.plan.PinWindow`,
  :class:`~duckstream.plan.SetValues` steps). A false "changed" guard becomes the literal
  ``false``, and Spark's optimizer drops the whole delta term before it reads anything.
- **No multi-statement transactions.** Every statement commits one table. The view's cursors
  therefore travel *inside the MV's own commit*: the one statement that changes the MV (an
  ``INSERT OVERWRITE`` when populating, a ``MERGE INTO`` when maintaining) carries them as
  Iceberg snapshot properties ``duckstream.cursor.<source> = <snapshot id>``, and every
  refresh reads them from there. There is no cursors table (``create_cursors_table`` is a
  ``SELECT`` saying where they are): a copy in a second table could only be written by a
  second commit, not atomically, at the cost of Spark jobs in every refresh.
- **Change feed.** ``CALL <catalog>.system.create_changelog_view`` between the cursor
  (exclusive) and the pinned end snapshot (inclusive); it removes copy-on-write carry-over
  rows. Old and new states are ``VERSION AS OF <snapshot>``. Iceberg snapshots are per table,
  so each source gets its own pinned end snapshot. The runner pins the same window from the
  tables' metadata without a Spark job, and reads a window of appends only with Iceberg's
  incremental append scan instead of the changelog (:mod:`.window`).
- **Where Iceberg has no change feed** the refresh stops with ``duckstream: rebuild required:
  ...`` instead of guessing: a cursor snapshot that was expired, a source that was replaced
  (``CREATE OR REPLACE``, rollback: its ancestry no longer contains the cursor) or whose
  schema changed (checked in SQL), and a source holding delete files (merge-on-read):
  Iceberg's changelog refuses every window of such a table until its delete files are
  compacted away. Rebuilding is running ``initialize_cursors`` again.
- **Temp views.** The sinks' intermediate results are plain temp views, read by the one
  statement that writes the view's table (Spark plans them into it; a cache would cost jobs
  of its own). Every temp view is dropped at the end (:class:`~duckstream.plan.Cleanup`, run
  also after a failure).

Rendered as text (``IVMPlan.maintain``), a Spark plan is for people: Spark SQL cannot set a
variable from a query, so a value query is followed by the ``SET`` lines it stands for, and
the steps only a runner can do (stop when nothing changed, commit with snapshot properties)
are comments above their statement.
"""

from __future__ import annotations

import functools
import re

from sqlglot import exp, parse_one

from duckstream.engines.base import MULT, Engine, Source, Version
from duckstream.engines.iceberg.decimals import pin_aggregate_types
from duckstream.engines.iceberg.dialect import (
    DIALECT,
    lit,
    placeholder,
    quoted,
    variable,
)
from duckstream.engines.iceberg.key_ranges import KeyRanges, RangeSpec
from duckstream.engines.iceberg.lateral import check_lateral
from duckstream.engines.iceberg.recursion import hoist, render_iterate, unrolled
from duckstream.engines.iceberg.series import check_series
from duckstream.engines.iceberg.unsupported import check_view, check_written
from duckstream.engines.iceberg.window import (
    CLOCK_PROPERTY,
    CURSOR_PROPERTY,
    REBUILD,
    SnapshotPin,
    WindowPin,
    WindowSource,
)
from duckstream.errors import UnsupportedSQLError
from duckstream.expressions import RaiseError
from duckstream.plan import (
    Applied,
    Begin,
    Cleanup,
    Commit,
    CommitWith,
    CreateTemp,
    Iterate,
    PinSnapshot,
    PinWindow,
    SetValues,
    Sql,
    Step,
    StopUnless,
)

# Spark 3.5 takes an Iceberg table read at two snapshots for the same plan (``sameResult``
# ignores the snapshot), so its optimizer rule RemoveNoopUnion keeps only one of
# ``SELECT k FROM t VERSION AS OF a UNION SELECT k FROM t VERSION AS OF b``: the rows only the
# second snapshot has are lost. A refresh reads sources at two snapshots in one query (the
# affected groups of an outer join, DISTINCT over old and new states), so it runs with that
# rule, an optimization only, excluded (tests/spark/test_session.py shows the bug).
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
NOOP_UNION = "org.apache.spark.sql.catalyst.optimizer.RemoveNoopUnion"
_ALIAS = re.compile(r"AS `(duckstream\.[^`]+)`")


@functools.lru_cache(maxsize=4096)
def _create_temp(step: CreateTemp) -> str:
    """Rendered once per step (by identity). A plain temp view: the one statement that writes
    the view's table reads it (the apply), so nothing is worth caching, and a cache costs
    jobs of its own."""
    table, query = step.table.sql(dialect=DIALECT), step.query.sql(dialect=DIALECT)
    return f"CREATE OR REPLACE TEMPORARY VIEW {table} AS {query}"


def value_query(step: PinSnapshot | PinWindow | SetValues) -> str:
    """The one-row query of a step that computes run-time values (its columns' aliases)."""
    if isinstance(step, PinSnapshot):
        return step.statement
    if isinstance(step, PinWindow):
        return str(step.spec)
    return step.query


def render(step: Step) -> list[str]:
    """Spark SQL for people: what only a runner can do is written as comments."""
    if isinstance(step, Sql | Cleanup):
        return [step.statement]
    if isinstance(step, Begin):
        # no transactions (the view's one commit carries its cursors); see NOOP_UNION
        return [f"SET {EXCLUDED_RULES} = {NOOP_UNION}"]
    if isinstance(step, Commit | Applied):
        return []
    if isinstance(step, CreateTemp):
        return [_create_temp(step)]
    if isinstance(step, Iterate):
        return render_iterate(step, lambda query: query.sql(dialect=DIALECT))
    if isinstance(step, PinSnapshot | PinWindow | SetValues):
        query = value_query(step)
        names = _ALIAS.findall(query)
        lines = "\n".join(f"-- {line}" for line in query.splitlines())
        # the script's joiner ends the last statement
        sets = ";\n".join(f"SET {name} = <its value>" for name in names)
        values = f"-- the values below are the one row of:\n{lines}\n{sets}"
        if isinstance(step, SetValues) and isinstance(step.spec, KeyRanges):
            values = f"{step.spec.note}\n{values}"
        if isinstance(step, PinWindow) and isinstance(step.spec, WindowPin):
            return [values, step.spec.check] if step.spec.check else [values]
        return [values]
    if isinstance(step, StopUnless):
        return [f"-- stop here (run only the clean-up) unless {step.value} is true"]
    if isinstance(step, CommitWith):
        props = ", ".join(f"{k} = {v}" for k, v in step.properties)
        text = f"-- commit the statement below with the snapshot properties {props}\n"
        if step.appends_only is not None:
            text += (
                "-- (when every changed source's snapshots since its cursor are appends, run"
                " instead, with the same properties:\n"
                + "\n".join(f"-- {line}" for line in step.appends_only.splitlines())
                + "\n-- )\n"
            )
        return [text + step.statement]
    raise TypeError(f"Iceberg plans have no {type(step).__name__} step")


class IcebergEngine(Engine):
    dialect = DIALECT
    grand_total_over_no_rows = False
    recursion = (
        "iterated by the runner, an Iterate step per recursion in the fill and the refresh"
        " (Spark 3.5 has no WITH RECURSIVE)"
    )

    def __init__(self) -> None:
        super().__init__()
        # The steps of the recursive CTEs (``.recursion``) read by the statements made so
        # far and not yet placed in the plan: a fill's go before its commit (populate), a
        # refresh's after its window is pinned (prepare_changes).
        self.hoisted: list[Step] = []
        self._recursions = 0
        # the key ranges the delta terms read (:meth:`key_range`): (source index, column) ->
        # its number and the (source, column) pairs filtered by it
        self._ranges: dict[tuple[int, str], tuple[int, set[tuple[str, str]]]] = {}

    # -- recursive CTEs: iterated (.recursion) -----------------------------------------------
    def _hoisted(self, expression: exp.Expr) -> exp.Expr:
        """``expression`` reading the temp views of its recursive CTEs, their steps kept in
        :attr:`hoisted` until placed."""
        if not any(w.args.get("recursive") for w in expression.find_all(exp.With)):
            return expression

        def temp(name: str) -> exp.Table:
            self._recursions += 1
            return self.temp_table(f"_ivm_{self.slug()}_rec{self._recursions}_{name}")

        query, steps = hoist(expression, temp)
        self.hoisted += steps
        return query

    def _placed(self) -> list[Step]:
        steps, self.hoisted = self.hoisted, []
        return steps

    def sql(self, expression: exp.Expr) -> str:
        return super().sql(self._hoisted(expression))

    def statement(self, expression: exp.Expr) -> Step:
        if isinstance(expression, exp.Create):  # a table of no rows: no step comes before it
            return Sql(super().sql(unrolled(expression)))
        return super().statement(expression)

    def create_temp(
        self, table: exp.Table, query: exp.Expr, changes_of: Source | None = None
    ) -> Step:
        return super().create_temp(table, self._hoisted(query), changes_of)

    def prepare_changes(self) -> list[Step]:
        """The values of the key ranges and the steps of the recursive CTEs the refresh's
        statements read (made as the sink made them, before this is called)."""
        ranges = [self._range_values()] if self._ranges else []
        return [*ranges, *self._placed()]

    # -- key ranges (.key_ranges): the bounds of each changed key, per refresh -----------------
    key_ranges = True

    def key_range(
        self, source: Source, column: str, target: exp.Table, target_column: str
    ) -> tuple[exp.Expr, exp.Expr] | None:
        """``${...range_<i>_<n>_low}``, ``${..._high}``: Spark pushes literal bounds into an
        Iceberg scan, where it pushes no semi-join (:mod:`.key_ranges`)."""
        by_name = {(s.catalog, s.schema, s.name): s for s in self.sources}
        other = by_name.get((target.catalog, target.db, target.name))
        if other is None:
            return None
        number, uses = self._ranges.setdefault((source.index, column), (len(self._ranges), set()))
        uses.add((other.fqn, target_column))
        name = f"range_{source.index}_{number}"
        return self.runtime_value(f"{name}_low"), self.runtime_value(f"{name}_high")

    def _range_values(self) -> Step:
        """One step setting every key range: as SQL the least and the greatest key over each
        source's changes view (a Spark job); the runner reads them from metadata."""
        specs = []
        by_source: dict[int, list[str]] = {}
        by_index = {s.index: s for s in self.sources}
        for (index, column), (number, uses) in sorted(self._ranges.items()):
            source = by_index[index]
            low, high = (self._key(f"range_{index}_{number}_{b}") for b in ("low", "high"))
            specs.append(
                RangeSpec(
                    source.fqn,
                    index,
                    column,
                    self._changelog(source).name,
                    low,
                    high,
                    tuple(sorted(uses)),
                )
            )
            key = self.sql(exp.to_identifier(column))
            by_source.setdefault(index, []).extend(
                [f"min({key}) AS {quoted(low)}", f"max({key}) AS {quoted(high)}"]
            )
        parts = [
            f"(SELECT {', '.join(items)} FROM {self.sql(self._changelog(by_index[i]))}) AS r{i}"
            for i, items in by_source.items()
        ]
        query = "SELECT *\nFROM " + "\n  CROSS JOIN ".join(parts)
        return SetValues(query, KeyRanges(query, tuple(specs)))

    def raise_error(self, message: str) -> exp.Expr:
        return RaiseError(this=exp.Literal.string(message))

    def pin_types(self, select: exp.Select, schema: dict | None) -> exp.Select:
        """Decimal SUM / AVG cast to the type Spark gives them (:mod:`.decimals`): a running
        total's type widens as deltas merge, and a division would round elsewhere."""
        return pin_aggregate_types(select, schema)

    def check_view(self, view: exp.Expr, select: exp.Select, schema: dict | None) -> None:
        check_written(view)
        check_view(select, schema)
        check_series(select)
        check_lateral(select)

    # -- run-time values -------------------------------------------------------------------
    def _key(self, name: str) -> str:
        return variable(self.slug(), name)

    def runtime_value(self, name: str) -> exp.Expr:
        return placeholder(self._key(name))

    def _value(self, name: str) -> str:
        return self.sql(self.runtime_value(name))

    def set_runtime_value(self, name: str, query: exp.Expr) -> Step:
        value = exp.alias_(
            exp.Subquery(this=query), exp.to_identifier(self._key(name), quoted=True)
        )
        return SetValues(f"SELECT {self.sql(value)}")

    def _end(self, source: Source) -> str:
        return self._value(f"end_{source.index}")

    def _cursor(self, source: Source) -> str:
        return self._value(f"cursor_{source.index}")

    def changed(self, source: Source) -> exp.Expr:
        changed = self.runtime_value(f"changed_{source.index}")
        if self.clock_filters:  # a temporal filter over the source changes as the clock moves
            return exp.paren(exp.or_(changed, self.clock_moved()))
        return changed

    # -- the clock: run-time values ``clock``, ``clock_old`` (microseconds since the epoch)
    # and ``clock_moved``, pinned by the runner (:func:`.window.pin_clock`) ------------------
    def read_clock(self, filters: frozenset[str], rebuilds: frozenset[str]) -> None:
        if "localtimestamp" in filters | rebuilds:
            raise UnsupportedSQLError("time", "localtimestamp is not a Spark 3.5 clock value")
        self.clock_filters, self.clock_rebuilds = filters, rebuilds

    @property
    def _reads_clock(self) -> bool:
        return bool(self.clock_filters or self.clock_rebuilds)

    def clock(self, version: Version, kind: str) -> exp.Expr:
        if version is Version.CURRENT:  # the empty table's types: no value pinned yet
            instant: exp.Expr = exp.CurrentTimestamp()
        else:
            # a string until the runner fills it in: the view's table is created from a query
            # reading the refresh's clock (its select list), before any value is pinned
            key = self._key("clock_old" if version is Version.OLD else "clock")
            micros = exp.cast(exp.Literal.string("${" + key + "}"), "bigint")
            instant = exp.Anonymous(this="timestamp_micros", expressions=[micros])
        return exp.cast(instant, "date") if kind == "current_date" else instant

    def clock_moved(self) -> exp.Expr:
        return self.runtime_value("clock_moved")

    def any_changed(self) -> exp.Expr:
        return self.runtime_value("changed")

    # -- relations -------------------------------------------------------------------------
    def state(self, source: Source, version: Version) -> exp.Expr:
        table = source.table()
        if version is not Version.CURRENT:
            at = f"end_{source.index}" if version is Version.NEW else f"cursor_{source.index}"
            table.set(
                "version",
                exp.Version(this="VERSION", kind="AS OF", expression=self.runtime_value(at)),
            )
        return exp.select("*").from_(table)

    def _changelog(self, source: Source) -> exp.Table:
        """The temp view of ``source``'s changes in the window (``create_changelog_view``)."""
        return self.temp_table(f"_ivm_{self.slug()}_changelog_{source.index}")

    def changes(self, source: Source) -> exp.Expr:
        # The changelog view's columns are the table's, then _change_type (INSERT / DELETE;
        # an update is both), _change_ordinal and _commit_snapshot_id.
        inserted = exp.EQ(
            this=exp.column("_change_type", table="_ivm_c"), expression=exp.Literal.string("INSERT")
        )
        sign = exp.Case(
            ifs=[exp.If(this=inserted, true=exp.Literal.number(1))], default=exp.Literal.number(-1)
        )
        mult = exp.alias_(exp.cast(sign, exp.DataType.build("bigint")), MULT)
        return exp.select("*", mult).from_(self._changelog(source).as_("_ivm_c"))

    # -- statements ------------------------------------------------------------------------
    def create_cursors_table(self) -> str:
        """No table: a view's cursors are the snapshot properties of its own commits (Spark
        has no transaction that could write a second table atomically with it). Mirroring
        them into a table cost every refresh a statement of 2-3 Spark jobs, ~0.5 s: this
        statement only says where they are, and creates nothing."""
        where = (
            f"duckstream: the cursors of {self.tgt.fqn} are the {CURSOR_PROPERTY}<source>"
            f" properties in the summary of its latest snapshot: SELECT summary FROM"
            f" {self.sql(self.tgt.table())}.snapshots"
        )
        return f"SELECT {lit(where)} AS cursors"

    def render(self, step: Step) -> list[str]:
        # the plan is rendered once it is whole: a recursion's steps not placed by then
        # would leave a statement reading a temp view nothing makes
        assert not self.hoisted, "recursive CTE steps made but not placed in the plan"
        return render(step)

    def drop(self, table: exp.Table) -> Step:
        """Drop a temp view (the runner runs these last, also after a failure)."""
        return Cleanup(f"DROP VIEW IF EXISTS {self.sql(table)}")

    def _current(self, table: exp.Table) -> str:
        """The current snapshot of ``table`` (a query)."""
        return f"(SELECT snapshot_id FROM {self._metadata(table, 'refs')} WHERE name = 'main')"

    def _metadata(self, table: exp.Table, name: str) -> str:
        """Iceberg's metadata table ``name`` (``snapshots``, ``history``, ...) of ``table``."""
        return f"{self.sql(table)}.{name}"

    def _pinned_end(self, source: Source) -> str:
        missing = (
            f"duckstream: source {source.fqn} has no snapshot (never written, or re-created):"
            " commit to it first, e.g. INSERT INTO <table> SELECT * FROM <table> WHERE false"
        )
        return f"coalesce({self._current(source.table())}, raise_error({lit(missing)}))"

    def pin_for_initialize(self) -> list[Step]:
        if not self.sources and not self._reads_clock:
            return []
        inner = [f"{self._pinned_end(s)} AS e{s.index}" for s in self.sources]
        outer = []
        for s in self.sources:
            outer.append(f"e{s.index} AS {quoted(self._key(f'end_{s.index}'))}")
            outer.append(f"e{s.index} AS {quoted(self._key(f'cursor_{s.index}'))}")
        if self._reads_clock:
            inner.append("unix_micros(current_timestamp()) AS now")
            outer += [
                f"now AS {quoted(self._key('clock'))}",
                f"now AS {quoted(self._key('clock_old'))}",
                f"false AS {quoted(self._key('clock_moved'))}",
            ]
        pin = "SELECT " + ",\n  ".join(outer) + "\nFROM (SELECT " + ", ".join(inner) + ") AS pinned"
        spec = SnapshotPin(
            self._key(""), tuple((s.fqn, s.index) for s in self.sources), self._reads_clock
        )
        return [PinSnapshot(pin, spec)]

    def _mv_cursors(self) -> str:
        """The summary of the MV's current snapshot, or of its latest ancestor that changed
        data when the current one is a compaction (``replace``, which carries no cursors)."""
        mv = self.tgt.table()
        latest = "struct(s.snapshot_id = r.snapshot_id, h.made_current_at)"
        return (
            f"SELECT max_by(s.summary, {latest}) AS summary"
            f" FROM {self._metadata(mv, 'snapshots')} AS s"
            f" JOIN {self._metadata(mv, 'history')} AS h ON s.snapshot_id = h.snapshot_id"
            f" CROSS JOIN {self._metadata(mv, 'refs')} AS r"
            " WHERE r.name = 'main' AND h.is_current_ancestor AND s.operation <> 'replace'"
        )

    def pin_window(self) -> list[Step]:
        inner, outer = [], []
        for s in self.sources:
            i = s.index
            no_cursor = (
                f"{REBUILD}no cursor for source {s.fqn} in the snapshots of {self.tgt.fqn}"
                " (not initialized, or the table was written outside duckstream)"
            )
            cursor = f"CAST(mv.summary[{lit(CURSOR_PROPERTY + s.fqn)}] AS BIGINT)"
            inner.append(f"{self._pinned_end(s)} AS e{i}")
            inner.append(f"coalesce({cursor}, raise_error({lit(no_cursor)})) AS c{i}")
            outer.append(f"e{i} AS {quoted(self._key(f'end_{i}'))}")
            outer.append(f"c{i} AS {quoted(self._key(f'cursor_{i}'))}")
            outer.append(f"e{i} <> c{i} AS {quoted(self._key(f'changed_{i}'))}")
        changed = " OR ".join(f"e{s.index} <> c{s.index}" for s in self.sources) or "false"
        if self._reads_clock:  # as plain SQL: the real clock (the runner reads the setting)
            changed = f"({changed}) OR clock_moved"
            inner += self._clock_columns()
            outer += [
                f"now AS {quoted(self._key('clock'))}",
                f"old AS {quoted(self._key('clock_old'))}",
                f"clock_moved AS {quoted(self._key('clock_moved'))}",
            ]
        outer.append(f"{changed} AS {quoted(self._key('changed'))}")
        pin = (
            "SELECT "
            + ",\n  ".join(outer)
            + "\nFROM (SELECT "
            + ",\n    ".join(inner)
            + f"\n  FROM ({self._mv_cursors()}) AS mv) AS pinned"
        )
        spec = WindowPin(
            query=pin,
            check=self._check_window(),
            view=self.tgt.fqn,
            prefix=self._key(""),
            sources=tuple(
                WindowSource(s.fqn, s.index, self._changelog(s).name) for s in self.sources
            ),
            clock_filters=tuple(sorted(self.clock_filters)),
            clock_rebuilds=tuple(sorted(self.clock_rebuilds)),
        )
        statements: list[Step] = [PinWindow(spec), StopUnless(self._value("changed"))]
        for s in self.sources:
            options = (
                f"map('start-snapshot-id', '{self._cursor(s)}',"
                f" 'end-snapshot-id', '{self._end(s)}')"
            )
            statements.append(
                Sql(
                    f"CALL {s.catalog}.system.create_changelog_view("
                    f"table => {lit(self.sql(exp.table_(s.name, db=s.schema)))},"
                    f" options => {options},"
                    f" changelog_view => {lit(self._changelog(s).name)})",
                    creates=self._changelog(s),
                )
            )
        return statements

    def _clock_columns(self) -> list[str]:
        """The clock of a window pinned in SQL: ``now``, ``old`` (recorded with the cursors),
        ``clock_moved`` (a value of the temporal filters moved), failing with ``duckstream:
        rebuild required: ...`` when another value the view reads moved."""
        now = "unix_micros(current_timestamp())"
        old = f"CAST(mv.summary[{lit(CLOCK_PROPERTY)}] AS BIGINT)"

        def value(kind: str, micros: str) -> str:
            instant = f"timestamp_micros({micros})"
            return f"CAST({instant} AS DATE)" if kind == "current_date" else instant

        moved = " OR ".join(
            f"{value(k, old)} <> {value(k, now)}" for k in sorted(self.clock_filters)
        )
        checks = "".join(
            f" WHEN {value(k, old)} <> {value(k, now)} THEN raise_error("
            f"{lit(REBUILD + 'the view reads ' + k + ', which moved from ')} ||"
            f" CAST({value(k, old)} AS STRING) || ' to ' || CAST({value(k, now)} AS STRING))"
            for k in sorted(self.clock_rebuilds)
        )
        missing = lit(REBUILD + "no clock recorded with the view's cursors")
        return [
            f"{now} AS now",
            f"CASE WHEN {old} IS NULL THEN raise_error({missing}){checks} ELSE {old} END AS old",
            f"coalesce({moved or 'false'}, false) AS clock_moved",
        ]

    def _check_window(self) -> str:
        """One query that fails with ``duckstream: rebuild required: ...`` when a source's
        cursor is no longer an ancestor of its current snapshot (expired, re-created,
        replaced, rolled back) or its schema changed since the cursor. Delete files
        (merge-on-read) in the window make Iceberg's changelog read fail later in the same
        refresh, before anything is committed; the runner reports that as a rebuild too.
        Empty for a view whose only source is the clock."""
        items = []
        for s in self.sources:
            t, cursor = s.fqn, self._cursor(s)
            log = self._metadata(s.table(), "metadata_log_entries")
            cases = [
                (
                    f"(SELECT count(*) FROM {self._metadata(s.table(), 'history')}"
                    f" WHERE snapshot_id = {cursor} AND is_current_ancestor) = 0",
                    f"the cursor snapshot of {t} is no longer in its history: expired, or the"
                    " table was re-created, replaced or rolled back",
                ),
                (  # unknown (NULL) once the metadata log no longer reaches the cursor
                    f"(SELECT min_by(latest_schema_id, timestamp) FROM {log}"
                    f" WHERE latest_snapshot_id = {cursor})"
                    f" <> (SELECT max_by(latest_schema_id, timestamp) FROM {log})",
                    f"the schema of {t} changed",
                ),
            ]
            whens = "".join(
                f"\n    WHEN {cond}\n      THEN raise_error({lit(REBUILD + why)})"
                for cond, why in cases
            )
            items.append(f"CASE{whens}\n  END AS {quoted(t)}")
        return "SELECT " + ",\n  ".join(items) if items else ""

    def record_cursors(self) -> list[Step]:
        return []  # the fill's commit carries them (populate)

    def advance_cursors(self) -> list[Step]:
        return []  # the MERGE's commit carries them (replace_rows)

    def _properties(self, sql: str, appends_only: str | None = None) -> Step:
        """``sql`` committed with the pinned end snapshots as the MV's snapshot properties
        (``appends_only``: :attr:`CommitWith.appends_only`)."""
        properties = [(f"{CURSOR_PROPERTY}{s.fqn}", self._end(s)) for s in self.sources]
        if self._reads_clock:
            properties.append((CLOCK_PROPERTY, self._value("clock")))
        return CommitWith(sql, tuple(properties), appends_only)

    def populate(self, inserts: list[exp.Insert]) -> list[Step]:
        if len(inserts) != 1:
            raise AssertionError("expected one INSERT to populate the view")
        overwrite = inserts[0].copy()
        overwrite.set("overwrite", True)
        commit = self._properties(self.sql(overwrite))
        return [*self._placed(), commit]

    def temp_table(self, name: str) -> exp.Table:
        return exp.table_(name)  # a temp view: session-scoped, one-part name

    def copies(self, mult: exp.Expr) -> exp.Expr:
        sequence = exp.Anonymous(this="sequence", expressions=[exp.Literal.number(1), mult])
        return exp.Explode(this=sequence)

    def replace_rows(
        self,
        keys: list[str],
        removed: exp.Query,
        added: exp.Query,
        columns: list[str],
        *,
        removes: exp.Query | None = None,  # one MERGE: no delete of its own to skip
        upsert: exp.Query | None = None,
        appends: exp.Query | None = None,
    ) -> list[Step]:
        """One MERGE, committed with the cursors. With ``appends``, an INSERT of those rows
        too (:attr:`CommitWith.appends_only`), which the runner runs instead when every
        changed source's window holds appends only: an Iceberg INSERT adds data files and
        reads nothing of the view's table, where a MERGE joins the view's table and
        rewrites the data files it touches (copy-on-write), in several Spark jobs."""

        def ident(name: str) -> str:
            return self.sql(exp.to_identifier(name, quoted=True))

        if upsert is not None:
            # One row per key: the MERGE reads its source once (the removed keys and the
            # added rows as two branches read the delta twice, in jobs of their own)
            on = " AND ".join(f"_ivm_t.{ident(k)} <=> _ivm_s.{ident(k)}" for k in keys)
            sets = ", ".join(f"{ident(c)} = _ivm_s.{ident(c)}" for c in columns)
            names = ", ".join(ident(c) for c in columns)
            values = ", ".join(f"_ivm_s.{ident(c)}" for c in columns)
            merge = (
                f"MERGE INTO {self.sql(self.tgt.table())} AS _ivm_t\n"
                f"USING ({self.sql(upsert)}) AS _ivm_s\nON {on}\n"
                "WHEN MATCHED AND NOT _ivm_s._ivm_keep THEN DELETE\n"
                f"WHEN MATCHED THEN UPDATE SET {sets}\n"
                f"WHEN NOT MATCHED AND _ivm_s._ivm_keep THEN INSERT ({names}) VALUES ({values})"
            )
            return [self._properties(merge)]

        key_names = [f"_ivm_key{i}" for i in range(len(keys))]
        gone = ", ".join(
            ["NULL AS " + ident(c) for c in columns]
            + [f"_ivm_k.{ident(k)} AS {n}" for k, n in zip(keys, key_names, strict=True)]
            + ["true AS _ivm_del"]
        )
        new = ", ".join(
            [f"_ivm_a.{ident(c)}" for c in columns]
            + [f"NULL AS {n}" for n in key_names]
            + ["false AS _ivm_del"]
        )
        source = (
            f"SELECT {gone} FROM ({self.sql(removed)}) AS _ivm_k\n  UNION ALL\n"
            f"  SELECT {new} FROM ({self.sql(added)}) AS _ivm_a"
        )
        on = " AND ".join(
            ["_ivm_s._ivm_del"]
            + [f"_ivm_t.{ident(k)} <=> _ivm_s.{n}" for k, n in zip(keys, key_names, strict=True)]
        )
        names = ", ".join(ident(c) for c in columns)
        values = ", ".join(f"_ivm_s.{ident(c)}" for c in columns)
        merge = (
            f"MERGE INTO {self.sql(self.tgt.table())} AS _ivm_t\n"
            f"USING ({source}) AS _ivm_s\nON {on}\n"
            "WHEN MATCHED THEN DELETE\n"
            f"WHEN NOT MATCHED AND NOT _ivm_s._ivm_del THEN INSERT ({names}) VALUES ({values})"
        )
        insert = None
        if appends is not None:
            insert = f"INSERT INTO {self.sql(self.tgt.table())} ({names})\n{self.sql(appends)}"
        return [self._properties(merge, appends_only=insert)]

    def fresh_row_ids_base(self) -> exp.Expr:
        # The largest row number in use: Iceberg answers max() from file statistics.
        largest = exp.Coalesce(
            this=exp.Max(this=exp.column("_ivm_row")), expressions=[exp.Literal.number(0)]
        )
        return exp.Subquery(this=exp.select(largest).from_(self.tgt.table()))

    def avg(self, total: exp.Expr, count: exp.Expr) -> exp.Expr:
        """Spark types AVG like its argument: DOUBLE for integers and doubles, and
        DECIMAL(p+4, s+4) for DECIMAL(p, s), rounded half up. ``total / count`` already has
        the right type except for decimals, where it carries more digits: round it to the
        scale of ``total`` (that of the argument) plus 4, read from ``typeof`` (a constant
        for the optimizer, so ``round`` accepts it). Other types keep every digit."""
        quotient = exp.Div(
            this=total.copy(),
            expression=exp.Nullif(this=count, expression=exp.Literal.number(0)),
        )
        type_name = exp.Anonymous(this="typeof", expressions=[total.copy()])
        scale = parse_one(
            "CASE WHEN t LIKE 'decimal(%' THEN CAST(regexp_extract(t, '([0-9]+)[)]$', 1) AS INT)"
            " + 4 ELSE 300 END",
            dialect=DIALECT,
        ).transform(lambda n: type_name.copy() if isinstance(n, exp.Column) else n)
        return exp.Anonymous(this="round", expressions=[quotient, scale])
