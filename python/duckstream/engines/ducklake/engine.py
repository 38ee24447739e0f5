"""DuckDB + DuckLake.

Run-time values live in DuckDB session variables (``SET VARIABLE`` / ``getvariable``): table
functions and ``AT (VERSION => ...)`` accept them where they refuse subqueries, and a guard
``WHERE getvariable('...')`` that is false lets the optimizer drop a whole delta term, so a
source that did not change costs nothing. ``maintain`` is one transaction: DuckLake gives it
snapshot isolation, and the window is pinned explicitly on top of that.

Every DuckLake statement costs catalog round trips (a table scan, a table function call: a few
milliseconds each before any row is read), so a refresh is shaped to issue few of them: the
window (end snapshots, cursors, "changed" flags) is one STRUCT variable, pinned by the runner
from two small reads of the catalog's snapshot log (:mod:`.window`), each
source's window is read from the change feed once (``prepare_changes``), and the cursors
travel in the refresh's own commit (:mod:`.cursors`): read with the window,
written by the commit that changes the view.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from duckstream.connection import literal as _lit
from duckstream.engines.base import MULT, Engine, Source, Version
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake import window as ducklake_window
from duckstream.engines.ducklake.names import same_names
from duckstream.engines.ducklake.old_states import derive_old_states
from duckstream.engines.ducklake.window_sql import pin_sql
from duckstream.plan import (
    Applied,
    Begin,
    Cleanup,
    Commit,
    CreateTemp,
    Measure,
    PinSnapshot,
    PinWindow,
    Sql,
    Step,
    StopUnless,
)

# The change feed's own columns, renamed out of the way of the source's.
_SNAPSHOT, _ROWID = "_ivm_snapshot", "_ivm_rowid"
# A window's change feed as read, and the rowids read again by time travel (prepare_changes).
_FEED, _REREAD = "_ivm_feed", "_ivm_reread"


def _mult(sign: int) -> exp.Expr:
    return exp.cast(exp.Literal.number(sign), exp.DataType.build("bigint"))


def _columns(source: Source) -> list[exp.Expr]:
    """The columns of ``source`` the view reads (every column when that is unknown)."""
    if source.columns is None:
        return [exp.Star()]
    return [exp.column(n, quoted=True) for n in sorted(source.columns)]


@functools.lru_cache(maxsize=4096)
def _create_temp(step: CreateTemp, appends_only: bool = False) -> str:
    """Rendered once per step (by identity): a refresh runs the same steps every time.
    ``appends_only``: its :attr:`~CreateTemp.appends_only` query (when it has one)."""
    query = step.appends_only if appends_only and step.appends_only is not None else step.query
    table = step.table.sql(dialect="duckdb")
    return f"CREATE OR REPLACE TEMP TABLE {table} AS {query.sql(dialect='duckdb')}"


def _guarded(insert: exp.Insert, guard: exp.Expr) -> exp.Insert:
    """``insert`` inserting nothing unless ``guard`` holds (a run-time constant, so a false
    guard lets the optimizer drop the query).

    >>> import sqlglot
    >>> q = sqlglot.parse_one("INSERT INTO v (a) SELECT a FROM t")
    >>> _guarded(q, exp.column("ok")).sql()
    'INSERT INTO v (a) SELECT * FROM (SELECT a FROM t) AS _ivm_fill WHERE ok'
    """
    guarded = insert.copy()
    query = guarded.expression
    guarded.set("expression", exp.select("*").from_(query.subquery("_ivm_fill")).where(guard))
    return guarded


def render(step: Step, window: ducklake_window.Window | None = None) -> list[str]:
    """Plain DuckDB SQL; the window pin as one ``SET VARIABLE`` that checks the window
    in SQL (:func:`.window_sql.pin_sql`: what the runner checks in Python). ``window``: the
    pinned window, when the runner knows it: a change copy of a source it shows without
    deletions is its :attr:`~CreateTemp.appends_only` query."""
    if isinstance(step, Sql | PinSnapshot | Cleanup):
        return [step.statement]
    if isinstance(step, Begin):
        return ["BEGIN TRANSACTION"]
    if isinstance(step, Commit):
        return ["COMMIT"]
    if isinstance(step, CreateTemp):
        appends_only = (
            window is not None
            and step.changes_of is not None
            and window.appends_only(step.changes_of)
        )
        return [_create_temp(step, appends_only)]
    if isinstance(step, PinWindow):
        return [pin_sql(step.spec)]
    if isinstance(step, Applied | StopUnless):
        return []  # StopUnless: the statements after it are guarded by the same value
    if isinstance(step, Measure):  # no clock in SQL: no measurement
        return [f"SET VARIABLE {step.variable} = NULL", step.statement]
    raise TypeError(f"DuckLake plans have no {type(step).__name__} step")


class DuckLakeEngine(Engine):
    dialect = "duckdb"
    changes_are_materialized = True
    # DuckDB decorrelates a NULL-safe EXISTS by grouping every row of its input first
    key_semijoins = True
    # TPC-H Q15 reads its revenue CTE twice (tree.shared_cte)
    shares_ctes = True
    fill_from_view = True

    # -- run-time values -------------------------------------------------------------------
    def _var(self, name: str) -> str:
        return f"_ivm_{self.slug()}_{name}"

    def runtime_value(self, name: str) -> exp.Expr:
        return exp.Anonymous(this="getvariable", expressions=[exp.Literal.string(self._var(name))])

    def set_runtime_value(self, name: str, query: exp.Expr) -> Step:
        return Sql(f"SET VARIABLE {self._var(name)} = ({self.sql(query)})")

    # The window of one refresh (end snapshot per catalog, cursor and "changed" per source) is
    # one STRUCT variable (:meth:`pin_window`): each statement costs a DuckLake round trip.
    def _window_value(self, field: str) -> exp.Expr:
        return exp.Dot(this=self.runtime_value("window"), expression=exp.to_identifier(field))

    def _end(self, catalog: str) -> exp.Expr:
        return self._window_value(f"end_{self._catalogs().index(catalog)}")

    def _cursor(self, source: Source) -> exp.Expr:
        return self._window_value(f"cursor_{source.index}")

    def changed(self, source: Source) -> exp.Expr:
        changed = self._window_value(f"changed_{source.index}")
        if self.clock_filters:  # a temporal filter over the source changes as the clock moves
            return exp.paren(exp.or_(changed, self.clock_moved()))
        return changed

    # -- the clock: fields of the window (``clock``, ``clock_old``, ``clock_moved``) ---------
    def read_clock(self, filters: frozenset[str], rebuilds: frozenset[str]) -> None:
        self.clock_filters, self.clock_rebuilds = filters, rebuilds

    @property
    def _reads_clock(self) -> bool:
        return bool(self.clock_filters or self.clock_rebuilds)

    def clock(self, version: Version, kind: str) -> exp.Expr:
        instant = self._window_value("clock_old" if version is Version.OLD else "clock")
        spelled = ducklake_window.CLOCK_VALUES[kind].format("_ivm_instant")
        return sqlglot.parse_one(spelled, dialect="duckdb").transform(
            lambda n: (
                instant.copy() if isinstance(n, exp.Column) and n.name == "_ivm_instant" else n
            )
        )

    def clock_moved(self) -> exp.Expr:
        return self._window_value("clock_moved")

    def any_changed(self) -> exp.Expr:
        return self._window_value("changed")

    # -- relations -------------------------------------------------------------------------
    def state(self, source: Source, version: Version) -> exp.Expr:
        return exp.select("*").from_(self._table_at(source, version))

    def _table_at(self, source: Source, version: Version) -> exp.Table:
        """``source`` read at ``version``: time travel to the window's end or its cursor."""
        table = source.table()
        if version is not Version.CURRENT:
            at = self._end(source.catalog) if version is Version.NEW else self._cursor(source)
            table.set("when", exp.HistoricalData(this="AT", kind="VERSION", expression=at))
        return table

    def _changes_table(self, source: Source) -> exp.Table:
        return self.temp_table(f"_ivm_{self.slug()}_changes_{source.index}")

    def changes(self, source: Source) -> exp.Expr:
        return exp.select("*").from_(self._changes_table(source))

    def _read_changes(
        self, source: Source, function: str, sign: int, *, ids: bool = True
    ) -> exp.Select:
        """One half of ``source``'s change feed in the window: the columns the view reads,
        ``_ivm_mult`` = ``sign`` and (``ids``) the feed's snapshot and rowid of each row;
        skipped when the pinned window shows that half empty."""
        # DuckDB binds the table function even when the guard below drops it, and an unchanged
        # source of another catalog has cursor = end: cursor + 1 is no snapshot there yet.
        start = exp.Anonymous(
            this="least",
            expressions=[
                exp.Add(this=self._cursor(source), expression=exp.Literal.number(1)),
                self._end(source.catalog),
            ],
        )
        call = exp.Anonymous(
            this=function,
            expressions=[
                exp.Literal.string(source.catalog),
                exp.Literal.string(source.schema),
                exp.Literal.string(source.name),
                start,
                self._end(source.catalog),
            ],
        )
        # A constant false guard keeps DuckDB from calling the table function at all.
        guard = self._window_value(f"inserts_{source.index}") if sign > 0 else self._deletes(source)
        feed_ids = (
            [exp.alias_(exp.column("snapshot_id"), _SNAPSHOT), exp.alias_("rowid", _ROWID)]
            if ids
            else []
        )
        return (
            exp.select(*_columns(source), exp.alias_(_mult(sign), MULT), *feed_ids)
            .from_(exp.Table(this=call))
            .where(guard)
        )

    def _versions_of(self, source: Source, version: Version, sign: int) -> exp.Select:
        """The rows of ``source`` at ``version`` (the window's end or its cursor) whose rowid
        is one of the window's re-read rowids (:meth:`prepare_changes`), ``_ivm_mult`` =
        ``sign``: no rowid to re-read, no file read (DuckDB skips a semi-join's probe side
        when its build side is empty)."""
        reread = exp.select(_ROWID).from_(_REREAD)
        return (
            exp.select(*_columns(source), exp.alias_(_mult(sign), MULT))
            .from_(self._table_at(source, version))
            .where(self._deletes(source))
            .where(exp.column("rowid").isin(query=reread))
        )

    def _deletes(self, source: Source) -> exp.Expr:
        """Whether the pinned window shows deletions (or updates) of ``source``: a rowid is
        re-read only then, and this constant guard spares an append-only window the two
        time-travel scans (DuckDB would set them up even with no rowid to look for: several
        ms of CPU per refresh)."""
        return self._window_value(f"deletes_{source.index}")

    def prepare_changes(self) -> list[Step]:
        """Copy each changed source's window (the columns the view reads) into a temporary
        table once, netted by content: per distinct row, the sum of its signed multiplicities,
        rows that net to zero left out. Every delta term then reads that table: DuckDB knows
        its size (it cannot size a table function), so it builds its hash joins on the small
        change set and pushes its key ranges into the scans of the big tables; the change feed
        is read once however many terms use it; and a row inserted and deleted inside the
        window (say one that breaks a CAST of the view) never reaches the view's expressions.
        Every rule downstream is linear in the multiplicity or nets by content itself, so a
        multiplicity other than +1/-1 is fine. An unchanged source's copy is empty and reads
        nothing.

        The feed, read as a multiset (insertions +1, deletions -1), is the window's change --
        except where DuckLake (1.5.5) lists a deleted row twice: a transaction that changes
        every row of a data file through several statements lists rows it deleted or updated
        twice in the deletions (``UPDATE t SET v = 1 WHERE k = 1; UPDATE t SET v = 2 WHERE k =
        2`` over a file of those two rows: each old version deleted twice, inserted once).
        Counting a deleted rowid once is no remedy: a row updated and then deleted in one
        transaction is legitimately listed twice (its old and its intermediate version, alike
        in the columns read). One snapshot lists a rowid once per half unless a transaction
        changed it more than once; so every rowid listed more than once by one snapshot in
        one half is *re-read*: its feed rows are replaced by its version at the window's end
        (+1) against its version at the cursor (-1), read by time travel. DuckLake keeps a
        row's rowid through updates, and a row's rowid in the feed is its rowid in the table
        (a row inserted and changed in one transaction keeps the transaction-local rowid it
        is listed under), so per rowid that difference is exactly the window's net change.
        Every such listing involves a deletion: a window without any (appends only) re-reads
        nothing, and its copy reads the insertions alone.

        For such a window the runner runs a plainer query of the same table
        (:attr:`CreateTemp.appends_only`): the insertions, each +1, not netted (no row can
        cancel another). The same rows, planned in ~2 ms CPU less (DuckDB 1.5.5: 2.3 ms
        against 6 for a one-row change): the full query binds both feeds and both
        time-travel scans however its guards turn out."""
        statements: list[Step] = []
        for s in self.sources:
            feed = exp.union(
                self._read_changes(s, "ducklake_table_insertions", 1),
                self._read_changes(s, "ducklake_table_deletions", -1),
                distinct=False,
            )
            reread = (
                exp.select(_ROWID)
                .distinct()
                .from_(_FEED)
                .where(self._deletes(s))
                .group_by(MULT, _SNAPSHOT, _ROWID)
                .having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1)))
            )
            columns: list[exp.Expr] = (  # and the multiplicity, after them
                [*(exp.column(n, quoted=True) for n in sorted(s.columns)), exp.column(MULT)]
                if s.columns is not None
                else [exp.Star(except_=[exp.to_identifier(_SNAPSHOT), exp.to_identifier(_ROWID)])]
            )
            trusted = (
                exp.select(*columns)
                .from_(_FEED)
                .where(exp.not_(exp.column(_ROWID).isin(query=exp.select(_ROWID).from_(_REREAD))))
            )
            change = exp.union(
                exp.union(trusted, self._versions_of(s, Version.NEW, 1), distinct=False),
                self._versions_of(s, Version.OLD, -1),
                distinct=False,
            )
            net_columns: list[exp.Expr] = (
                [exp.column(n, quoted=True) for n in sorted(s.columns)]
                if s.columns is not None
                else [exp.Star(except_=[exp.to_identifier(MULT)])]
            )
            total = exp.Sum(this=exp.column(MULT))
            netted = (
                exp.select(*net_columns, exp.alias_(exp.cast(total, "bigint"), MULT))
                .from_(exp.paren(change).as_("_ivm_change"))
                .group_by("ALL")
                .having(exp.NEQ(this=total.copy(), expression=exp.Literal.number(0)))
                .with_(_FEED, as_=feed, materialized=True)
                .with_(_REREAD, as_=reread, materialized=True)
            )
            appends = self._read_changes(s, "ducklake_table_insertions", 1, ids=False)
            statements.append(CreateTemp(self._changes_table(s), netted, s.fqn, appends))
        return statements

    # -- statements ------------------------------------------------------------------------
    def create_cursors_table(self) -> str:
        """The append-only cursors log (see :mod:`duckstream.engines.ducklake.cursors`)."""
        return (
            f"CREATE TABLE IF NOT EXISTS {self.sql(self.tgt.cursors_table())} ("
            "mv_name VARCHAR, source_table VARCHAR, table_id BIGINT, last_snapshot BIGINT)"
        )

    def render(self, step: Step) -> list[str]:
        return render(step)

    def drop(self, table: exp.Table) -> Step:
        """Drop a temporary table of this refresh after its COMMIT (change copies, deltas):
        they live in the session, holding memory until the connection closes otherwise."""
        return Cleanup(f"DROP TABLE IF EXISTS {self.sql(table)}")

    def _catalogs(self) -> list[str]:
        return sorted({s.catalog for s in self.sources} | {self.tgt.catalog})

    def _table_ids(self) -> str:
        """One read of each source catalog's live tables: every source's table id, NULL when
        it does not exist (a scalar subquery per source cost a few ms each)."""
        reads = []
        for catalog in sorted({s.catalog for s in self.sources}):
            meta = ducklake_cursors.metadata_database(catalog)
            wanted = ", ".join(
                f"({s.index}, {_lit(s.fqn)}, {_lit(s.schema)}, {_lit(s.name)})"
                for s in self.sources
                if s.catalog == catalog
            )
            reads.append(
                f"SELECT v.source, v.fqn, t.table_id"
                f" FROM (VALUES {wanted}) AS v(source, fqn, schema_name, table_name)"
                f" LEFT JOIN ({meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s"
                " ON t.schema_id = s.schema_id AND t.end_snapshot IS NULL"
                " AND s.end_snapshot IS NULL)"
                f" ON {same_names('s.schema_name', 'v.schema_name')}"
                f" AND {same_names('t.table_name', 'v.table_name')}"
            )
        return f"_ivm_ids AS MATERIALIZED ({' UNION ALL '.join(reads)})"

    def pin_for_initialize(self) -> list[Step]:
        """One statement: the end snapshot of each catalog (``ducklake_current_snapshot``, the
        transaction's snapshot, far cheaper than the snapshot list) and each source's table
        id, failing with ``duckstream: source table ... does not exist`` when one is missing;
        and whether the view's table lacks the inlining option (``unset``:
        :meth:`after_fill`)."""
        ends = " UNION ALL ".join(
            f"SELECT {k} AS catalog, CAST(id AS BIGINT) AS e"
            f" FROM ducklake_current_snapshot({_lit(c)})"
            for k, c in enumerate(self._catalogs())
        )
        ctes = [f"_ivm_ends AS MATERIALIZED ({ends})"]
        ends_row = ", ".join(
            f"max(e) FILTER (WHERE catalog = {k}) AS end_{k}" for k in range(len(self._catalogs()))
        )
        fields = [f"end_{k} := end_{k}" for k in range(len(self._catalogs()))]
        for s in self.sources:
            k = self._catalogs().index(s.catalog)
            fields += [
                f"cursor_{s.index} := end_{k}",
                f"changed_{s.index} := true",
                f"table_id_{s.index} := table_id_{s.index}",
            ]
        # whether the view's table lacks the inlining option, for the fill's after-steps
        fields += ["changed := true", f"unset := {ducklake_window.inlining_unset(self.tgt.fqn)}"]
        if self._reads_clock:  # read once: the fill and the cursors' record use this value
            ctes.append(f"_ivm_clock AS MATERIALIZED (SELECT {ducklake_window.NOW} AS n)")
            fields += [
                "clock := (SELECT n FROM _ivm_clock)",
                "clock_old := (SELECT n FROM _ivm_clock)",
                "clock_moved := false",
            ]
        window = f"struct_pack({', '.join(fields)})"
        if not self.sources:
            query = f"SELECT {window} FROM (SELECT {ends_row} FROM _ivm_ends)"
            return [
                PinSnapshot(
                    f"SET VARIABLE {self._var('window')} = (WITH {', '.join(ctes)} {query})"
                )
            ]
        ctes.append(self._table_ids())
        ids = ", ".join(
            f"max(table_id) FILTER (WHERE source = {s.index}) AS table_id_{s.index}"
            for s in self.sources
        )
        query = (
            "SELECT CASE WHEN i.missing IS NOT NULL THEN error('duckstream: source table '"
            f" || i.missing || ' does not exist') ELSE {window} END"
            f" FROM (SELECT {ends_row} FROM _ivm_ends) AS e,"
            f" (SELECT min(fqn) FILTER (WHERE table_id IS NULL) AS missing, {ids}"
            " FROM _ivm_ids) AS i"
        )
        return [
            PinSnapshot(f"SET VARIABLE {self._var('window')} = (WITH {', '.join(ctes)} {query})")
        ]

    def after_fill(self, inserts: list[exp.Insert]) -> list[Step]:
        """Keep the view's table out of data inlining, after the fill's COMMIT, and write a
        fill DuckLake inlined once more, to a data file.

        DuckLake keeps small inserts in the catalog database ("data inlining"). A DuckDB
        catalog stores them as SQL literals, and DuckDB reads a DOUBLE literal back through
        a DECIMAL: 0.9591791901271283 becomes ...284. The bag and grouped sinks find a view
        row by its values, so such a row would never be deleted (TPC-DS Q31). The option
        belongs to the table (a rebuild's CREATE OR REPLACE drops it), and DuckLake refuses
        it for a table created in the open transaction (a rebuild's), hence after the
        COMMIT, with every fill: the refreshes' inserts are never inlined.

        The fill itself is inlined when it has few rows (at most the catalog's limit, 10 by
        default) and the option was not set before it: the table was created with it, or
        holds no option yet. Then its rows are written again, exactly, in a transaction of
        their own: the same fill at the same pinned snapshots. The refill advances no cursor,
        so it records none (the fill's commit holds them, and a refresh reads the newest
        commit that does). The catalog's file list tells: the table holds more rows than its
        data files do. The
        refill's statements are guarded by that check (the deletes counted are those of live
        data files: a rebuild ends the data files of the rows it deletes, not their delete
        files), so they are no-ops when it is false,
        and the runner skips them (:class:`~duckstream.plan.StopUnless`).

        A rebuild that kept the table (``DELETE`` and ``INSERT``: a refresh's) finds the
        option already set on it when it pins its snapshot (the window's ``unset``,
        :func:`.window.inlining_unset`: read with the window, not by a statement of its own):
        nothing was inlined, and the runner skips the rest. The set and the check cost 8-12
        ms at TPC-H SF 0.1, after the COMMIT, a fifth of a rebuild of Q6 that auto does not
        see in its measurements. A runner that creates or replaces the table in the fill's
        transaction (setup) goes on past that guard (:attr:`StopUnless.about_old_table`):
        the pin read the old table's option, and the new table has none. As plain SQL, the
        rest runs: setting the option again changes nothing, and the check finds nothing
        inlined."""
        tgt = self.tgt
        catalog = self.sql(exp.to_identifier(tgt.catalog, quoted=True))
        keep_out = Sql(
            f"CALL {catalog}.set_option('data_inlining_row_limit', 0, schema => {_lit(tgt.schema)},"
            f" table_name => {_lit(tgt.name)})"
        )
        inlined = self.runtime_value("inlined")
        meta = ducklake_cursors.metadata_database(tgt.catalog)
        table_id = ducklake_window.view_table_id(tgt.fqn)
        # rows kept in the catalog: DuckLake's ``filename`` virtual column names their
        # inlined table; a table whose rebuild also had its deletes inlined (its option
        # changed by hand) hides them from the count of data and delete files. A view column
        # of that name shadows the virtual one: the count alone then.
        columns = {c.name.lower() for c in inserts[0].this.expressions} if inserts else set()
        by_name = (
            ""
            if "filename" in columns
            else f" OR EXISTS (SELECT 1 FROM {self.sql(tgt.table())}"
            " WHERE filename LIKE 'ducklake_inlined_data%')"
        )
        check = Sql(
            f"SET VARIABLE {self._var('inlined')} = (WITH t AS MATERIALIZED ({table_id})"
            f" SELECT (SELECT count(*) FROM {self.sql(tgt.table())})"
            f" > (SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_data_file"
            " WHERE end_snapshot IS NULL AND table_id IN (SELECT table_id FROM t))"
            f" - (SELECT coalesce(sum(delete_count), 0) FROM {meta}.ducklake_delete_file"
            " WHERE end_snapshot IS NULL AND data_file_id IN (SELECT data_file_id"
            f" FROM {meta}.ducklake_data_file WHERE end_snapshot IS NULL"
            f" AND table_id IN (SELECT table_id FROM t))){by_name})"
        )
        refill = [
            self.statement(exp.delete(tgt.table(), where=inlined)),
            *(self.statement(_guarded(insert, inlined)) for insert in inserts),
        ]
        return [
            StopUnless(self._var("window"), field="unset", about_old_table=True),
            keep_out,
            check,
            StopUnless(self._var("inlined")),
            Begin(),
            *refill,
            Commit(),
        ]

    def record_cursors(self) -> list[Step]:
        return self._write_cursors(guard=None)

    def _write_cursors(self, guard: exp.Expr | None) -> list[Step]:
        """This view's cursors (the pinned ends) into the commit's extra info, and their rows
        appended to the cursors log, which makes sure the commit makes a snapshot (DuckLake
        makes none when nothing changed). One INSERT: each statement costs a round trip.

        The runner appends them only when the transaction wrote nothing else
        (:attr:`Sql.snapshot_only`; as plain SQL always): a commit that writes a second
        table costs DuckLake 6-7 ms CPU more (DuckDB 1.5.5, a one-row change), a seventh of
        a small refresh and a sixth of a rebuild of TPC-H Q6 at SF 0.1. The commits
        themselves are the history (``ducklake_snapshots``, message ``cursors of <view>``).
        A view whose only source is the clock records no cursor but its clock: its log row
        names no source (NULL), at the view catalog's end."""
        cursors = [
            (
                s.fqn,
                self.sql(self._window_value(f"table_id_{s.index}")),
                self.sql(self._end(s.catalog)),
            )
            for s in self.sources
        ]
        mv = _lit(self.tgt.name)
        rows = ", ".join(f"({mv}, {_lit(fqn)}, {tid}, {snap})" for fqn, tid, snap in cursors)
        if not cursors:
            rows = f"({mv}, NULL, NULL, {self.sql(self._end(self.tgt.catalog))})"
        where = f" WHERE {self.sql(guard)}" if guard is not None else ""
        measured = self._var("measured")
        return [
            Measure(
                measured,
                ducklake_cursors.record(
                    self.tgt.catalog,
                    self.tgt.fqn,
                    cursors,
                    measured,
                    self.sql(self._window_value("clock")) if self._reads_clock else None,
                ),
                tuple(s.fqn for s in self.sources),
            ),
            Sql(
                f"INSERT INTO {self.sql(self.tgt.cursors_table())} (mv_name, source_table,"
                f" table_id, last_snapshot) SELECT * FROM (VALUES {rows}){where}",
                snapshot_only=True,
            ),
        ]

    def pin_window(self) -> list[Step]:
        """The window to pin (:mod:`duckstream.engines.ducklake.window`: the runner reads the
        catalogs' snapshot logs since the cursors and checks them in Python, as planning the
        checks as SQL cost more than running them; rendered, the same checks are one SQL
        statement); it fails with ``duckstream: rebuild required:
        ...`` when a cursor is missing or expired, or a source was altered."""
        spec = ducklake_window.WindowSpec(
            variable=self._var("window"),
            view=self.tgt.fqn,
            catalogs=self._catalogs(),
            sources=[s.fqn for s in self.sources],
            cursors=self.tgt.cursors_fqn,
            clock_filters=tuple(sorted(self.clock_filters)),
            clock_rebuilds=tuple(sorted(self.clock_rebuilds)),
        )
        return [PinWindow(spec)]

    def advance_cursors(self) -> list[Step]:
        """Like :meth:`record_cursors`, when any source changed or the cursors are far behind
        (the window's ``advance``); else nothing is written, no snapshot is made, and the
        cursors stay where they are."""
        return self._write_cursors(guard=exp.or_(self.any_changed(), self._window_value("advance")))

    def temp_table(self, name: str) -> exp.Table:
        return exp.table_(name, db="main", catalog="temp")

    def create_temp(
        self, table: exp.Table, query: exp.Expr, changes_of: Source | None = None
    ) -> Step:
        """A delta or state table's query with its key-filtered reads of a source through one
        column sharing one scan, the old states derived from it (:mod:`.old_states`)."""
        if changes_of is None:
            reads = {
                s.table().sql(dialect="duckdb"): (
                    _columns(s),
                    self._changes_table(s),
                    self._cursor(s),
                    self._end(s.catalog),
                )
                for s in self.sources
                if s.columns is not None
            }
            flags = {s.fqn: self.changed(s) for s in self.sources}
            query = derive_old_states(query, reads, self.copies, flags)
        return super().create_temp(table, query, changes_of)

    def copies(self, mult: exp.Expr) -> exp.Expr:
        return exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[mult])])

    def replace_rows(
        self,
        keys: list[str],
        removed: exp.Query,
        added: exp.Query,
        columns: list[str],
        *,
        removes: exp.Query | None = None,
        upsert: exp.Query | None = None,
        appends: exp.Query | None = None,
    ) -> list[Step]:
        """A DELETE and an INSERT; the DELETE is skipped by the runner when ``removes`` has no
        row (:attr:`Sql.needed`): it scans the view's table even when nothing matches (12 ms
        CPU for a one-row view refreshed 30 times, growing with its data files), while the
        read of a temporary table costs ~0.3 ms: an append to a view without aggregates
        removes nothing. ``upsert`` is unused: DuckLake's MERGE allows one UPDATE or DELETE
        action only. ``appends`` is unused: skipping the DELETE leaves the INSERT alone."""
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
        delete = exp.delete(self.tgt.table().as_("_ivm_t"), where=gone)
        names = [exp.to_identifier(c, quoted=True) for c in columns]
        insert = exp.insert(added, self.tgt.table(), columns=names)
        needed = None if removes is None else self.sql(exp.select(exp.Exists(this=removes)))
        return [Sql(self.sql(delete), needed=needed), self.statement(insert)]

    def fresh_row_ids_base(self) -> exp.Expr:
        # The MV catalog's snapshot at the start of this refresh, shifted left 32 bits: every
        # refresh that inserts commits a new snapshot, so the next base is larger.
        return exp.Mul(
            this=exp.cast(self._end(self.tgt.catalog), exp.DataType.build("bigint")),
            expression=exp.Literal.number(4294967296),
        )
