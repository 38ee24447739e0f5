"""Pin a DuckLake refresh window: read the catalog's snapshot log, check it in Python.

A refresh's window is, per catalog, the end snapshot it applies up to and, per source, the
cursor it starts from, the source's table id and whether (and how) the source changed in
between. The runner (:func:`.runner.run_statements`) pins it when it meets the
plan's :class:`~duckstream.plan.PinWindow` step (its spec a :class:`WindowSpec`) with two
plain reads of the catalogs' metadata (:func:`read`): each catalog's end (the
transaction's snapshot, ``ducklake_current_snapshot``) with the view's cursors (the extra info
of the newest commit that recorded them, :mod:`duckstream.engines.ducklake.cursors`); then
each catalog's snapshot log from its oldest cursor to its end, with, per source, whether the
catalog's file lists show data files added, data files dropped or delete files written in its
window. A third read, the table id each source's name points to at that end, runs only when a
snapshot of the window lists DDL (:func:`renames_possible`). :func:`window_from` checks those
rows, and the runner sets the window variable to the literal result. This is what every
refresh pays before it reads any change, so it is kept small on purpose:

* the same checks as one SQL statement took DuckDB ~20 ms to *plan* for ~4 ms of work;
* ``ducklake_snapshots()`` lists a catalog's whole history (~10 ms per 1,000 snapshots, and a
  lake gains a snapshot with every commit); the log since the cursors is a few rows.

A plan rendered as SQL (``IVMPlan.maintain``) pins the window with
:func:`duckstream.engines.ducklake.window_sql.pin_sql` instead: one ``SET VARIABLE`` whose
query reads the same metadata and applies the same rules, failing with ``duckstream: rebuild
required: ...`` from SQL. Both are tested against recomputation.

>>> spec = WindowSpec("v", "lake.main.mv", ["lake"], ["lake.main.t"])
>>> log = {0: [(1, "inserted_into_table:5"), (2, "inlined_insert:7"), (3, "inlined_insert:5")]}
>>> window = window_from(spec, [("lake.main.t", 5, 1)], {0: 3}, log)
>>> window.sources["lake.main.t"], window.values["changed_0"], window.kinds["lake.main.t"]
((5, 1, 3), True, frozenset({'inlined_insert'}))
>>> window.values["inserts_0"], window.values["deletes_0"]
(True, False)

A view follows the tables it was built from, by table id: when a source's name points to
another table at the end (renamed away and replaced, two tables swapped) or to none, the
window cannot be maintained.

>>> try:
...     window_from(spec, [("lake.main.t", 5, 1)], {0: 3}, log, tables={"lake.main.t": 9})
... except RebuildRequired as error:
...     print(error.reason)
source lake.main.t was renamed, dropped or recreated (table id 5, now 9)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from duckstream.connection import literal as _lit
from duckstream.engines.ducklake import cursors as ducklake_cursors
from duckstream.engines.ducklake.names import same_names, table_sql
from duckstream.errors import RebuildRequired
from duckstream.plan import PinWindow
from duckstream.strategy import History

# Change kinds of DuckLake's snapshot log (``changes_made``) that only add rows, or only remove
# rows. A window whose log lists only one of them for a source may skip reading the other half
# of its change feed -- but only when the catalog's file lists agree (:func:`window_from`):
# reading the deletions of a table that has any delete file costs a metadata query that grows
# with its delete files (~25 ms with one, ~100 ms with 200 in DuckDB 1.5.5) even when the window
# deleted nothing, and an append-only window is the common one.
INSERT_KINDS = frozenset({"inserted_into_table", "inlined_insert"})
DELETE_KINDS = frozenset({"deleted_from_table", "inlined_delete"})
ALTER_KINDS = frozenset({"altered_table", "dropped_table"})
# The kinds that change a table's rows only: a window whose snapshots list nothing else
# cannot have pointed a table's name to another table (:func:`renames_possible`).
ROW_KINDS = INSERT_KINDS | DELETE_KINDS

# One item of ``changes_made``: ``kind:target``, the target a number (a table id) or quoted
# names, which may hold commas (``created_table:"main"."a,b"``).
_ITEM = re.compile(r'([a-z_]+):((?:"(?:[^"]|"")*"\.?)+|[^,]*)(?:,|$)')
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')  # one quoted name of a target


@dataclass(frozen=True)
class WindowSpec:
    """What the runner needs to pin one view's window: the session variable to set, the view
    (whose catalog's snapshot log holds its cursors), the catalogs read (in the order of the
    ``end_<k>`` fields) and the sources (in the order of their ``<field>_<i>`` fields)."""

    variable: str
    view: str
    catalogs: list[str]
    sources: list[str]
    # The view's append-only cursors log (``catalog.schema.table``), read only to say why a
    # window has no cursors (:func:`read`); empty when unknown.
    cursors: str = ""
    # The clock values the view reads (normalize.pin_clock): in temporal filters (a move is
    # a change: ``clock_moved``) and elsewhere (a move requires a rebuild).
    clock_filters: tuple[str, ...] = ()
    clock_rebuilds: tuple[str, ...] = ()

    @property
    def reads_clock(self) -> bool:
        return bool(self.clock_filters or self.clock_rebuilds)


# The session variable a refresh reads the clock from when it is set (a TIMESTAMPTZ, or text
# that casts to one): tests and replays set the time; unset, the clock is ``now()`` (the
# transaction's start).
NOW_VARIABLE = "duckstream_now"
NOW = f"coalesce(CAST(getvariable({_lit(NOW_VARIABLE)}) AS TIMESTAMPTZ), now())"

# Each clock value of a view as a function of the clock (SQL, ``{}``: a TIMESTAMPTZ; cast
# even so: a statement bound before the window is pinned, e.g. the CREATE of the view's
# table, reads it as NULL, of no type).
CLOCK_VALUES = {
    "current_timestamp": "CAST({} AS TIMESTAMPTZ)",
    "current_date": "CAST({} AS DATE)",
    "localtimestamp": "CAST({} AS TIMESTAMP)",
}


class Timestamp(str):
    """A window field that is a ``TIMESTAMPTZ`` (its text): :func:`set_window` casts it."""


def clock_values(con: Any, spec: WindowSpec, recorded: str | None) -> dict[str, Any]:
    """The window's clock fields: ``clock`` (read now, once: :data:`NOW`), ``clock_old``
    (``recorded`` with the cursors by the refresh the view reflects) and ``clock_moved``
    (a value of its temporal filters moved); :class:`RebuildRequired` when another clock
    value it reads moved, or none was recorded."""
    if recorded is None:
        raise RebuildRequired("no clock recorded with the view's cursors (build the view again)")
    kinds = [*spec.clock_filters, *spec.clock_rebuilds]
    moved = ", ".join(
        f"{CLOCK_VALUES[k].format('o')} IS DISTINCT FROM {CLOCK_VALUES[k].format('n')}"
        for k in kinds
    )
    shown = ", ".join(
        f"CAST({CLOCK_VALUES[k].format(v)} AS VARCHAR)" for k in kinds for v in ("o", "n")
    )
    row = con.execute(
        f"SELECT CAST(n AS VARCHAR), [{moved}], [{shown}] FROM (SELECT {NOW} AS n,"
        f" CAST({_lit(recorded)} AS TIMESTAMPTZ) AS o)"
    ).fetchone()
    now, flags, texts = row
    for i, kind in enumerate(kinds):
        if flags[i] and kind in spec.clock_rebuilds:
            raise RebuildRequired(
                f"the view reads {kind}, which moved from {texts[2 * i]} to {texts[2 * i + 1]}"
            )
    filter_moved = any(flags[i] for i, k in enumerate(kinds) if k in spec.clock_filters)
    return {"clock": Timestamp(now), "clock_old": Timestamp(recorded), "clock_moved": filter_moved}


# A refresh whose sources did not change commits nothing, unless a cursor is this many snapshots
# behind its catalog's end: then the window says ``advance`` and its cursors move to the end
# (one small commit). Expiring snapshots (:mod:`duckstream.engines.ducklake.expire`) keeps
# every snapshot from the oldest cursor on: a view over tables that rarely change would
# otherwise hold all of them back.
ADVANCE_IDLE_CURSORS = 100


@dataclass
class Window:
    """A pinned window: the fields of the window variable, and per source the kinds of change
    (``inserted_into_table``, ``inlined_delete``, ...) its window holds and its bounds. The
    kinds are those of the snapshot log, plus ``inserted_into_table`` / ``deleted_from_table``
    when the catalog's file lists show data files added / rows deleted that the log did not
    list (see :func:`window_from`)."""

    variable: str
    values: dict[str, Any]
    kinds: dict[str, frozenset[str]] = field(default_factory=dict)
    sources: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # id, cursor, end
    snapshots: dict[str, frozenset[int]] = field(default_factory=dict)  # that changed a source
    # the view's recent measurements, when the pin read them (:func:`read`'s ``history``)
    history: History | None = None

    def appends_only(self, source: str) -> bool:
        """Whether the window shows ``source`` (a full name) without deletions: its change
        feed holds insertions alone (or nothing)."""
        return source in self.kinds and not self.kinds[source] - INSERT_KINDS


def changed_tables(changes_made: str | None) -> list[tuple[str, str]]:
    """The ``(kind, target)`` items of a snapshot's ``changes_made``.

    >>> changed_tables('created_table:"main"."a,b",inserted_into_table:12')
    [('created_table', '"main"."a,b"'), ('inserted_into_table', '12')]
    """
    items, at, text = [], 0, changes_made or ""
    while at < len(text):
        match = _ITEM.match(text, at)
        if match is None or match.end() == at:  # a shape DuckLake does not write
            raise ValueError(f"unreadable DuckLake changes_made: {text!r}")
        items.append((match.group(1), match.group(2)))
        at = match.end()
    return items


def renames_possible(
    snapshots: list[tuple[int, str | None]],
    cursor: int,
    recorded: int | None = None,
    sources: frozenset[tuple[str, str]] = frozenset(),
) -> bool:
    """Whether a snapshot of ``snapshots`` after ``cursor`` could have pointed a table name
    to another table. A name points to another table only through DDL, which DuckLake lists
    in the snapshot's ``changes_made``: ``created_table`` under the new name for a rename (DuckDB
    1.5.5), ``dropped_table``, a schema created or dropped. Not through rows inserted or
    deleted (:data:`ROW_KINDS`), nor ``altered_table`` (columns, comments; a source's is a
    rebuild of its own, :data:`ALTER_KINDS`). ``recorded``: the snapshot that recorded the
    view's cursors, duckstream's own commit, whose DDL creates the view's own tables (its
    table, the cursors log, a guard, dbt's state): its ``created_table`` items count only for
    a name of ``sources`` (``(schema, table)``, lower case). A snapshot that lists nothing
    counts (unknown).

    The cursors a window starts from were recorded by a refresh that read each source's
    table id at the cursor snapshot: with no such snapshot since, every name still points
    there, and the window need not read the table ids again (~1 ms CPU of every refresh's
    pin, DuckDB 1.5.5).

    >>> renames_possible([(3, "inlined_insert:5"), (4, "inserted_into_table:7")], 3)
    False
    >>> renames_possible([(3, 'created_table:"main"."t"'), (4, "altered_table:5")], 3)
    False
    >>> renames_possible([(3, "inlined_insert:5"), (4, 'created_table:"main"."t"')], 3)
    True
    >>> mine = 'created_table:"main"."mv",inlined_insert:2'
    >>> renames_possible([(4, mine)], 3, 4, frozenset({("main", "t")}))
    False
    >>> renames_possible([(4, mine)], 3, 4, frozenset({("main", "mv")}))
    True
    >>> renames_possible([(4, None)], 3)
    True
    """
    for snapshot_id, changes_made in snapshots:
        if snapshot_id <= cursor:
            continue
        if changes_made is None:
            return True
        for kind, target in changed_tables(changes_made):
            if kind in ROW_KINDS or kind == "altered_table":
                continue
            if kind == "created_table" and snapshot_id == recorded:
                names = [n.replace('""', '"').lower() for n in _QUOTED.findall(target)]
                if len(names) == 2 and (names[0], names[1]) not in sources:
                    continue
            return True
    return False


def window_from(
    spec: WindowSpec,
    cursors: list[tuple[str, int, int]],
    ends: dict[int, int],
    log: dict[int, list[tuple[int, str | None]]],
    tables: dict[str, int | None] | None = None,
    files: dict[str, tuple[bool, bool]] | None = None,
) -> Window:
    """The window; or :class:`RebuildRequired`.

    ``cursors``: the view's recorded cursors ``(source, table id, snapshot)``; ``ends``: each
    catalog's end snapshot (by its index in ``spec.catalogs``); ``log``: per catalog, the
    snapshots ``(snapshot_id, changes_made)`` from its oldest cursor to its end; ``tables``:
    the table id each source's name points to at its catalog's end (``None``: no table);
    ``files``: per source, whether the catalog's file lists show, in ``(cursor, end]``, data
    files added, and data files dropped or delete files written (``None``: not read).

    The rules: there must be exactly one cursor per source, and each cursor's snapshot must
    still be in the log (else it was expired); each source's name must still point to the
    table id of its cursor (else it was renamed away, dropped or replaced, and the feed read
    by name would be another table's). A source *changed* when a snapshot in ``(cursor, end]``
    lists its table id under any kind of change, or its file lists changed; it was *altered*
    (a rebuild is required) under ``altered_table`` / ``dropped_table``. It has *inserts*
    unless every listed kind only removes rows and no data file was added; *deletes* unless
    every listed kind only adds rows and no data file was dropped and no delete file written.
    The log alone is not proof: a transaction that inserts rows and then updates or deletes
    some of them is listed as ``inserted_into_table`` only, while its delete file (and the
    deletions feed) holds the removed rows.
    """
    cursors = [c for c in cursors if c[0] in spec.sources]
    recorded = {source: (table_id, snapshot) for source, table_id, snapshot in cursors}
    if spec.sources and not cursors:
        raise RebuildRequired("no cursors recorded (the view was never built)")
    if len(cursors) != len(spec.sources) or len(recorded) != len(spec.sources):
        raise RebuildRequired("no single cursor for every source (initialize the view)")
    window: dict[str, Any] = {f"end_{k}": ends[k] for k in range(len(spec.catalogs))}
    window["changed"] = False
    all_kinds: dict[str, frozenset[str]] = {}
    bounds: dict[str, tuple[int, int, int]] = {}
    snapshots_of: dict[str, frozenset[int]] = {}
    expired, altered, moved = [], [], []
    for i, source in enumerate(spec.sources):
        table_id, cursor = recorded[source]
        k = spec.catalogs.index(source.split(".", 1)[0])
        snapshots = log.get(k, [])
        if all(snapshot_id != cursor for snapshot_id, _ in snapshots):
            expired.append((source, cursor))
        if tables is not None and tables.get(source) != table_id:
            moved.append((source, table_id, tables.get(source)))
        kinds = {
            kind
            for snapshot_id, changes_made in snapshots
            if cursor < snapshot_id <= ends[k]
            for kind, target in changed_tables(changes_made)
            if target == str(table_id)
        }
        snapshots_of[source] = frozenset(
            snapshot_id
            for snapshot_id, changes_made in snapshots
            if cursor < snapshot_id <= ends[k]
            and any(target == str(table_id) for _, target in changed_tables(changes_made))
        )
        if kinds & ALTER_KINDS:
            altered.append(source)
        added, removed = (files or {}).get(source, (False, False))
        if added and not kinds - DELETE_KINDS:
            kinds.add("inserted_into_table")
        if removed and not kinds - INSERT_KINDS:
            kinds.add("deleted_from_table")
        all_kinds[source] = frozenset(kinds)
        bounds[source] = (table_id, cursor, ends[k])
        window |= {
            f"cursor_{i}": cursor,
            f"table_id_{i}": table_id,
            f"changed_{i}": bool(kinds),
            f"inserts_{i}": bool(kinds - DELETE_KINDS),
            f"deletes_{i}": bool(kinds - INSERT_KINDS),
        }
        window["changed"] = window["changed"] or bool(kinds)
    lag = max((end - cursor for _, cursor, end in bounds.values()), default=0)
    window["advance"] = not window["changed"] and lag >= ADVANCE_IDLE_CURSORS
    if expired:
        source, cursor = min(expired)
        raise RebuildRequired(f"the cursor snapshot {cursor} of {source} was expired")
    if altered:
        raise RebuildRequired(f"source {min(altered)} was altered or recreated")
    if moved:  # a rename is logged under the new name only: the table ids tell
        source, was, now = min(moved, key=lambda m: m[0])
        now = "no table" if now is None else now
        raise RebuildRequired(
            f"source {source} was renamed, dropped or recreated (table id {was}, now {now})"
        )
    return Window(spec.variable, window, all_kinds, bounds, snapshots_of)


def read(
    con: Any,
    spec: WindowSpec,
    *,
    pin: bool = False,
    history: bool = False,
    ends_first: bool = False,
) -> Window:
    """The window of ``spec`` on ``con``; with ``pin``, also set its variable (inside the
    refresh's transaction, before the statements that use it); with ``history``, also the
    view's recent measurements (:func:`duckstream.engines.ducklake.cursors.history`), from
    the same read as its cursors (the commits that recorded them).

    ``ends_first``: read each catalog's end in a statement of its own, before anything reads
    the metadata database. DuckLake reads its snapshot through a connection of its own, in a
    transaction of its own on the metadata database; the reads here are the refresh's
    connection's, in another, which begins at its first read. With a catalog that other
    processes commit to (PostgreSQL), a commit landing between the two would be visible to
    one and not the other; read first, the end is never newer than what the metadata reads
    see (they are bounded by it), so no cursor commit or change below it is missed."""
    view_catalog = spec.view.split(".", 1)[0]
    # each catalog's end as a relation of one column ``id``
    current = {c: f"ducklake_current_snapshot({_lit(c)})" for c in spec.catalogs}
    if ends_first:
        found = con.execute(
            "SELECT "
            + ", ".join(f"(SELECT CAST(id AS BIGINT) FROM {current[c]})" for c in spec.catalogs)
        ).fetchone()
        current = {c: f"(SELECT {int(e)} AS id)" for c, e in zip(spec.catalogs, found, strict=True)}
    # 1. each catalog's end, and the view's newest cursors no newer than its catalog's end
    #    (and the commits before them, for ``history``): one row per commit, newest first,
    #    the ends on each (one row, no commit, when none recorded them). A join, each end
    #    read once: as a UNION ALL of the ends' rows and the commits' (the view catalog's end
    #    read again to bound them) it cost DuckDB 1.5.5 ~0.7 ms CPU more.
    limit = ducklake_cursors.HISTORY if history else 1
    ends_from = " CROSS JOIN ".join(f"{current[c]} AS e{k}" for k, c in enumerate(spec.catalogs))
    ends_sql = ", ".join(f"CAST(e{k}.id AS BIGINT)" for k in range(len(spec.catalogs)))
    first = (
        f"SELECT {ends_sql}, c.snapshot_id, c.commit_extra_info FROM {ends_from}"
        f" LEFT JOIN ({ducklake_cursors.commits_query(view_catalog, spec.view)}) AS c"
        f" ON c.snapshot_id <= e{spec.catalogs.index(view_catalog)}.id"
        f" ORDER BY c.snapshot_id DESC NULLS LAST LIMIT {int(limit)}"
    )
    ends: dict[int, int] = {}
    cursors: list[tuple[str, int, int]] = []
    commits: list[tuple[int, str]] = []
    width = len(spec.catalogs)
    for row in con.execute(first).fetchall():
        ends = {k: int(end) for k, end in enumerate(row[:width])}
        if row[width] is not None:
            commits.append((int(row[width]), row[width + 1]))
    commits.sort(reverse=True)
    if commits:
        cursors = ducklake_cursors.parse(commits[0][1])
    if spec.sources and not any(source in spec.sources for source, _, _ in cursors):
        _no_cursors(con, spec)
    # 2. each catalog's snapshot log from its oldest cursor to its end, and per source whether
    #    its file lists changed in its window
    since = dict(ends)
    bounds: dict[int, list[tuple[int, int, int]]] = {k: [] for k in ends}
    for source, table_id, snapshot in cursors:
        if source in spec.sources:
            k = spec.catalogs.index(source.split(".", 1)[0])
            since[k] = min(since[k], snapshot)
            bounds[k].append((spec.sources.index(source), table_id, snapshot))
    second = []
    for k, meta in enumerate(map(ducklake_cursors.metadata_database, spec.catalogs)):
        second.append(
            f"SELECT {k} AS catalog, s.snapshot_id, c.changes_made, NULL AS table_id,"
            " NULL AS added, NULL AS removed"
            f" FROM {meta}.ducklake_snapshot AS s"
            f" LEFT JOIN {meta}.ducklake_snapshot_changes AS c USING (snapshot_id)"
            f" WHERE s.snapshot_id >= {since[k]} AND s.snapshot_id <= {ends[k]}"
        )
        if bounds[k]:
            second.append(_file_changes(k, meta, {t for _, t, _ in bounds[k]}, ends[k]))
    log: dict[int, list[tuple[int, str | None]]] = {k: [] for k in ends}
    newest: dict[tuple[int, int], tuple[int, int]] = {}
    for catalog, snapshot_id, changes_made, table_id, added, removed in con.execute(
        " UNION ALL ".join(second)
    ).fetchall():
        if table_id is None:
            log[catalog].append((int(snapshot_id), changes_made))
        else:
            was = newest.get((catalog, table_id), (-1, -1))
            newest[(catalog, table_id)] = (
                max(was[0], -1 if added is None else int(added)),
                max(was[1], -1 if removed is None else int(removed)),
            )
    files = {
        spec.sources[n]: _files_moved(newest, k, table_id, cursor)
        for k, found in bounds.items()
        for n, table_id, cursor in found
    }
    # 3. the table id each source's name points to at its catalog's end, when a snapshot of
    #    its window could have moved a name (:func:`renames_possible`)
    tables: dict[str, int | None] | None = None
    # the snapshot that recorded the cursors: the view catalog's (its DDL is duckstream's own)
    recorded = commits[0][0] if commits else None
    moved = [
        renames_possible(log[k], since[k])
        if c != view_catalog
        else renames_possible(log[k], since[k], recorded, _names_in(spec, c))
        for k, c in enumerate(spec.catalogs)
    ]
    if any(moved) and (ids := _table_ids(spec)):
        tables = dict.fromkeys(spec.sources)
        for _, n, value, _ in con.execute(" UNION ALL ".join(ids)).fetchall():
            if value is not None:
                tables[spec.sources[n]] = int(value)
    window = window_from(spec, cursors, ends, log, tables, files)
    if ends_first and (mislabeled := _mislabeled(con, spec, window)):
        source, label = mislabeled
        raise RebuildRequired(
            f"DuckLake labelled deletions of {source} committed after its cursor with the"
            f" earlier snapshot {label} (a commit landed while they were being written): its"
            " change feed for the window misses them"
        )
    if ends_first and commits and (rewritten := _rewritten(con, spec, window, commits[0][1])):
        source, cursor, then, now = rewritten
        raise RebuildRequired(
            f"DuckLake labelled deletions of {source} committed after its cursor with an"
            f" earlier snapshot (a commit landed while they were being written): its cursor"
            f" snapshot {cursor} now shows {now} rows, the refresh there counted {then}; its"
            " change feed for the window misses them"
        )
    if spec.reads_clock:
        recorded = ducklake_cursors.recorded_clock(commits[0][1]) if commits else None
        window.values |= clock_values(con, spec, recorded)
        window.values["changed"] = window.values["changed"] or window.values["clock_moved"]
    if history:
        found = (ducklake_cursors.measurement(info) for _, info in commits)
        window.history = History.of(m for m in found if m is not None)
    if pin:
        con.execute(set_window(spec.variable, window.values))
    return window


def view_table_id(view: str) -> str:
    """A query of the view table's id (``view``: ``catalog.schema.table``), read from the
    catalog database: as committed before the transaction reading it (a table created or
    replaced in that transaction is not there, or is the old one)."""
    catalog, schema, name = view.split(".", 2)
    meta = ducklake_cursors.metadata_database(catalog)
    return (
        f"SELECT t.table_id FROM {meta}.ducklake_table AS t JOIN {meta}.ducklake_schema AS s"
        " ON t.schema_id = s.schema_id AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL"
        f" WHERE {same_names('s.schema_name', _lit(schema))}"
        f" AND {same_names('t.table_name', _lit(name))}"
    )


def inlining_unset(view: str) -> str:
    """A boolean SQL expression: whether the view's table (as committed) lacks DuckLake's
    option ``data_inlining_row_limit = 0``, which every fill sets after its COMMIT
    (:meth:`DuckLakeEngine.after_fill`). The window's field ``unset``: a rebuild's pin reads
    it with the rest of the window (~1 ms more there, against 4-5 ms CPU as a statement of
    its own before the fill's transaction, DuckDB 1.5.5); after the runner's pin
    (:func:`read`), :func:`with_unset` adds it."""
    meta = ducklake_cursors.metadata_database(view.split(".", 1)[0])
    return (
        f"NOT EXISTS (SELECT 1 FROM {meta}.ducklake_metadata WHERE scope = 'table'"
        " AND key = 'data_inlining_row_limit' AND value = '0'"
        f" AND scope_id IN ({view_table_id(view)}))"
    )


def with_unset(spec: WindowSpec) -> str:
    """Add the field ``unset`` (:func:`inlining_unset`) to a window pinned by :func:`read`,
    for a rebuild that follows it (the fill's after-steps read it): one statement inside the
    refresh's transaction, paid by rebuilds only (in :func:`read`, each refresh's first query
    took 1.4 ms CPU longer, DuckDB 1.5.5)."""
    variable = _lit(spec.variable)
    return (
        f"SET VARIABLE {spec.variable} = struct_insert(getvariable({variable}),"
        f" unset := {inlining_unset(spec.view)})"
    )


def _names_in(spec: WindowSpec, catalog: str) -> frozenset[tuple[str, str]]:
    """The ``(schema, table)`` names (lower case) of the sources of ``spec`` in ``catalog``."""
    return frozenset(
        (schema.lower(), name.lower())
        for c, schema, name in (s.split(".", 2) for s in spec.sources)
        if c == catalog
    )


def _table_ids(spec: WindowSpec) -> list[str]:
    """Per catalog, a query of ``('table', source index, table id)``: the table each source's
    name points to now (no row: none), read inside the refresh's transaction, so at the same
    snapshot as its end. Names are matched without regard to case, as DuckDB resolves them
    (DuckLake keeps the case they were created with)."""
    queries = []
    for catalog in spec.catalogs:
        wanted = [
            f"({i}, {_lit(schema)}, {_lit(name)})"
            for i, (c, schema, name) in enumerate(s.split(".", 2) for s in spec.sources)
            if c == catalog
        ]
        if not wanted:
            continue
        meta = ducklake_cursors.metadata_database(catalog)
        queries.append(
            "SELECT 'table', v.n, t.table_id, NULL"
            f" FROM (VALUES {', '.join(wanted)}) AS v(n, schema_name, table_name)"
            f" JOIN {meta}.ducklake_schema AS s ON lower(s.schema_name) = lower(v.schema_name)"
            " AND s.end_snapshot IS NULL"
            f" JOIN {meta}.ducklake_table AS t ON t.schema_id = s.schema_id"
            " AND lower(t.table_name) = lower(v.table_name) AND t.end_snapshot IS NULL"
        )
    return queries


def _file_changes(k: int, meta: str, table_ids: set[int], end: int) -> str:
    """Rows ``(k, NULL, NULL, table id, added, removed)`` of catalog ``k``'s file lists up to
    ``end``, per table of ``table_ids``: the newest snapshot that added a data file
    (``added``), and the newest that dropped a data file or wrote a delete file
    (``removed``, one row of each kind); :func:`_files_moved` compares them with each
    source's cursor. Those are the places DuckLake's insertions and deletions feeds read rows
    from, besides inlined rows (small changes kept in the catalog, always listed in the
    snapshot log: DuckLake nets a transaction's inlined inserts and deletes before it
    commits). Grouped by table, the cursors compared in Python: the same read joined to the
    cursors in SQL (``VALUES``, ``LEFT JOIN``, grouped by source) took DuckDB 1.5.5 ~1.3 ms CPU
    more to plan (correlated EXISTS per source: ~1 ms each)."""
    ids = ", ".join(str(table_id) for table_id in sorted(table_ids))
    return (
        f"SELECT {k}, NULL, NULL, table_id, max(begin_snapshot),"
        f" max(end_snapshot) FILTER (WHERE end_snapshot <= {end})"
        f" FROM {meta}.ducklake_data_file WHERE table_id IN ({ids}) AND begin_snapshot <= {end}"
        f" GROUP BY table_id UNION ALL SELECT {k}, NULL, NULL, table_id, NULL, max(begin_snapshot)"
        f" FROM {meta}.ducklake_delete_file WHERE table_id IN ({ids}) AND begin_snapshot <= {end}"
        " GROUP BY table_id"
    )


def _files_moved(
    newest: dict[tuple[int, int], tuple[int, int]], k: int, table_id: int, cursor: int
) -> tuple[bool, bool]:
    """Whether a source (its catalog ``k``, table id and cursor) had data files added, and
    data files dropped or delete files written, after its cursor: from ``newest``, per
    ``(catalog, table id)`` the newest such snapshots (:func:`_file_changes`; -1: none)."""
    added, removed = newest.get((k, table_id), (-1, -1))
    return added > cursor, removed > cursor


def _mislabeled(con: Any, spec: WindowSpec, window: Window) -> tuple[str, int] | None:
    """A source of the window, and a snapshot, when DuckLake's change feed misses deletions
    of it: ``(source, label)``, else None.

    DuckLake 1.5.5 writes a delete file that adds deletions to a data file's earlier ones
    (one file, each deleted row with its snapshot) labelling the new rows with the writing
    transaction's snapshot + 1, a guess made before its commit; the commit updates the
    catalog, not the file. When other commits land in between, the rows carry a snapshot
    older than their commit: a refresh that pinned its window before that commit never saw
    them, and the next window, which starts at its end, skips their label. Seen from the
    catalog: a delete file committed in the window (file ids grow with each commit: its id
    is at least the cursor snapshot's ``next_file_id`` and below the end's) whose newest
    label (``partial_max``) is at or before the cursor. Read only for catalogs that other
    processes commit to (:func:`read`'s ``ends_first``)."""
    by_catalog: dict[str, list[str]] = {}
    for i, source in enumerate(spec.sources):
        table_id, cursor, end = window.sources[source]
        if window.values[f"deletes_{i}"] and cursor < end:
            by_catalog.setdefault(source.split(".", 1)[0], []).append(
                f"({i}, {table_id}, {cursor}, {end})"
            )
    parts = []
    for catalog, values in by_catalog.items():
        meta = ducklake_cursors.metadata_database(catalog)
        parts.append(
            "SELECT w.n, max(d.partial_max)"
            f" FROM (VALUES {', '.join(values)}) AS w(n, table_id, cursor, e)"
            f" JOIN {meta}.ducklake_snapshot AS c ON c.snapshot_id = w.cursor"
            f" JOIN {meta}.ducklake_snapshot AS x ON x.snapshot_id = w.e"
            f" JOIN {meta}.ducklake_delete_file AS d ON d.table_id = w.table_id"
            " AND d.partial_max <= w.cursor AND d.delete_file_id >= c.next_file_id"
            " AND d.delete_file_id < x.next_file_id GROUP BY w.n"
        )
    if not parts:
        return None
    found = sorted(con.execute(" UNION ALL ".join(parts)).fetchall())
    return (spec.sources[found[0][0]], int(found[0][1])) if found else None


def _rewritten(
    con: Any, spec: WindowSpec, window: Window, info: str
) -> tuple[str, int, int, int] | None:
    """A source whose history DuckLake rewrote below its cursor: ``(source, cursor, rows the
    refresh that moved the cursor there counted, rows time travel to the cursor shows now)``,
    else None.

    :func:`_mislabeled` reads the evidence a delete file keeps (its ``partial_max``), but the
    next deletion from the same data file replaces that file (DuckLake 1.5.5 keeps one delete
    file per data file, its rows labelled): the label of the late deletions is then hidden
    in the file. Their effect is not: time travel to the cursor now shows them deleted, so
    the source holds fewer rows there than the refresh that moved the cursor counted in its
    own transaction (:func:`duckstream.engines.ducklake.runner.source_rows`, recorded in its
    history entry on a catalog other processes commit to). Exact, one count per source that
    shows deletions in the window (time travel counts from the files' metadata and the delete
    files); a source with no count recorded at its cursor (a build from plain SQL) is left to
    :func:`_mislabeled`."""
    recorded = ducklake_cursors.source_rows(info)
    wanted = []
    for i, source in enumerate(spec.sources):
        _, cursor, end = window.sources[source]
        counted = recorded.get(source)
        if window.values[f"deletes_{i}"] and cursor < end and counted and counted[0] == cursor:
            wanted.append((source, cursor, counted[1]))
    if not wanted:
        return None
    found = con.execute(
        "SELECT "
        + ", ".join(
            f"(SELECT count(*) FROM {table_sql(source)} AT (VERSION => {cursor}))"
            for source, cursor, _ in wanted
        )
    ).fetchone()
    for (source, cursor, then), now in zip(wanted, found, strict=True):
        if int(now) != then:
            return source, cursor, then, int(now)
    return None


def _exists(con: Any, table: str) -> bool:
    """Whether the table ``catalog.schema.table`` exists (a failed statement would abort the
    refresh's transaction: looked up first)."""
    parts = table.split(".")
    return len(parts) == 3 and bool(
        con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE lower(database_name) = lower(?)"
            " AND lower(schema_name) = lower(?) AND lower(table_name) = lower(?)",
            parts,
        ).fetchone()[0]
    )


def _no_cursors(con: Any, spec: WindowSpec) -> None:
    """Raise why a view has no cursor commit: it was never built, or the commit that
    recorded its cursors was expired (``ducklake_expire_snapshots``). The view's cursors log
    keeps the cursors of the commits that wrote nothing else (:meth:`DuckLakeEngine.
    _write_cursors`); reading it costs a table scan, paid only here, on the way to a
    rebuild. A view whose log has none but whose table exists was built (its table is
    created in the transaction that fills it) unless it was created by hand."""
    last: list[tuple[str, int]] = []
    if _exists(con, spec.cursors):
        mv_name = spec.view.rsplit(".", 1)[-1]
        last = con.execute(
            f"SELECT source_table, max(last_snapshot) FROM {spec.cursors}"
            f" WHERE mv_name = {_lit(mv_name)} GROUP BY source_table"
        ).fetchall()
    last = [(source, int(snapshot)) for source, snapshot in last if source in spec.sources]
    if last:
        source, snapshot = min(last, key=lambda c: (c[1], c[0]))
        raise RebuildRequired(
            f"the cursor snapshot {snapshot} of {source} was expired (the commit that"
            " recorded the view's cursors is gone)"
        )
    if _exists(con, spec.view):
        raise RebuildRequired(
            "no cursors recorded: the commit that recorded the view's cursors was expired"
            " (or its table was never filled)"
        )
    raise RebuildRequired("no cursors recorded (the view was never built)")


def set_window(variable: str, window: dict[str, Any]) -> str:
    """``SET VARIABLE`` to the window as a literal struct (integers as BIGINT)."""
    fields = ", ".join(f"{name} := {_value(value)}" for name, value in window.items())
    return f"SET VARIABLE {variable} = struct_pack({fields})"


def spec_of(steps: list[Any]) -> WindowSpec:
    """The window spec of the :class:`~duckstream.plan.PinWindow` step among ``steps``."""
    return next(s.spec for s in steps if isinstance(s, PinWindow))


def _value(value: Any) -> str:
    if isinstance(value, Timestamp):
        return f"CAST({_lit(value)} AS TIMESTAMPTZ)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"CAST({int(value)} AS BIGINT)"
