"""The step interpreter of a Spark plan: run its steps (:mod:`duckstream.plan`) on a Spark
session, in order, the clean-up last, also after a failure.

Spark SQL takes no run-time values where a refresh needs them (``VERSION AS OF``, ``CALL``
arguments) and has no multi-statement transactions, so a Spark plan's steps need a runner
beyond plain statements:

:class:`~duckstream.plan.PinSnapshot`, ``PinWindow``, ``SetValues``
    Run the query (one row). Each column is a value named by its alias; later statements
    use it as ``${<alias>}`` (by hand: ``SET <alias> = <value>``, Spark substitutes it).
    The window and the key ranges (``SetValues`` of :class:`.key_ranges.KeyRanges`) are
    read from Iceberg's metadata instead, without a Spark job.
:class:`~duckstream.plan.StopUnless`
    If the value is false, nothing changed: skip to the clean-up.
:class:`~duckstream.plan.CommitWith`
    Commit the statement with these Iceberg snapshot properties (the view's cursors,
    committed with its data): :func:`duckstream.spark.sql_with_commit_properties`; its
    ``appends_only`` statement instead when the pinned window holds appends only (an INSERT
    for a view that only grows, in place of a MERGE).
:class:`~duckstream.plan.Cleanup`
    Runs after every other step, also when one failed.

This module does exactly that, substituting ``${...}`` itself (so it does not depend on
``spark.sql.variable.substitute``; the one setting it changes is ``Begin``'s: Spark's
optimizer rule RemoveNoopUnion excluded, see
:data:`~duckstream.engines.iceberg.engine.NOOP_UNION`), and raises
:class:`~duckstream.errors.RebuildRequired` when a refresh cannot read its window from
Iceberg. The flow around it (setup, the choice of path, the history) is
:mod:`duckstream.engines.iceberg.runner`'s.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from duckstream.engines.iceberg.engine import EXCLUDED_RULES, NOOP_UNION, render, value_query
from duckstream.engines.iceberg.key_ranges import KeyRanges
from duckstream.engines.iceberg.pinned_commit import into_branch, pinned_commit
from duckstream.engines.iceberg.recursion import ITERATION, LAST, PREVIOUS
from duckstream.engines.iceberg.session import sql_with_commit_properties
from duckstream.engines.iceberg.window import (
    STARTED_PROPERTY,
    SnapshotPin,
    TableLog,
    WindowPin,
    now_micros,
    pin,
    read_logs,
    register_appends,
    register_no_changes,
    register_positional,
)
from duckstream.errors import DuckstreamError, RebuildRequired
from duckstream.history import ICEBERG_PROPERTY, Entry
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
from duckstream.sinks.bag import APPENDS_REMOVE
from duckstream.strategy import Phase

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# Spark's runtime group filter makes a MERGE into an Iceberg table first find, in jobs of
# their own, the data files holding matched rows, so that it rewrites only those: worth it
# for a big view, not for a small one, which the MERGE rewrites whole in less time than the
# filter's jobs take (a one-row refresh of a 100-row view: 13 -> 10 jobs, 2.7 -> 1.9 s of
# CPU). Set before each refresh's MERGE for its view and left so, like ``NOOP_UNION`` (a
# restore would race with refreshes on other threads); either value gives the same rows.
GROUP_FILTER = "spark.sql.optimizer.runtime.rowLevelOperationGroupFilter.enabled"
SMALL_VIEW_BYTES = 16 << 20
_PLACEHOLDER = re.compile(r"\$\{(duckstream\.[A-Za-z0-9_.]+)\}")
_SAFE_VALUE = re.compile(r"^-?[0-9]+$|^true$|^false$")
_REBUILD = re.compile(r"duckstream: rebuild required: [^\n]*")
_VIEW = re.compile(r"CREATE OR REPLACE TEMPORARY VIEW (\S+) AS (.*)", re.DOTALL)
# Iceberg's own errors for windows its changelog cannot read (a race past the plan's checks).
_ICEBERG_REBUILD = {
    "Delete files are currently not supported in changelog scans": (
        "a source has delete files (merge-on-read) in the refresh window, which Iceberg's"
        " changelog cannot read; keep sources copy-on-write (write.delete.mode,"
        " write.update.mode, write.merge.mode)"
    ),
    "is not a parent ancestor of end snapshot": (
        "a source's cursor snapshot is no longer an ancestor of its current snapshot"
    ),
    "Cannot find snapshot": "a source's cursor snapshot no longer exists (expired)",
}


@dataclass
class Run:
    """Values computed so far by ``set`` queries, keyed by their ``${...}`` names; the
    window's metadata (``logs``: read once per refresh, :func:`.window.read_logs`) and the
    changes views to read by Iceberg's append scan (``appends``, :func:`.window.pin`)."""

    values: dict[str, str] = field(default_factory=dict)
    logs: dict[str, TableLog] | None = None
    appends: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    positional: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    changelog: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    unchanged: dict[str, str] = field(default_factory=dict)  # changes view -> table
    changes_of: dict[str, str] = field(default_factory=dict)  # changes view -> table
    view: str | None = None  # the view a refresh maintains, and the bytes of its data files
    view_bytes: int = 0
    pinned_view: int | None = None  # the view's snapshot its cursors were read from
    entry: Callable[[], Entry] | None = None  # the history entry its commit carries
    started_ms: int | None = None  # when the refresh started (ms since the epoch)
    # temp views not made yet
    pending: dict[str, CreateTemp | Iterate] = field(default_factory=dict)
    # the rows a recursion kept for its result's view, released after the plan's clean-up
    # (dropping a temporary view leaves the frame's blocks in the Spark context)
    kept: list[DataFrame] = field(default_factory=list)

    def create_read(self, spark: SparkSession, text: str) -> None:
        """Create the pending temp views ``text`` reads (and those they read), first. A
        temp view is made when a statement first reads it, not where the plan lists it:
        creating one costs Spark an analysis of its query (0.1 s for a view's delta), and
        a statement chosen at run time may read none (a view that only grows inserts the
        window's rows without the netted delta: :attr:`CommitWith.appends_only`)."""
        for name in [n for n in self.pending if re.search(rf"\b{re.escape(n)}\b", text)]:
            step = self.pending.pop(name, None)
            if step is None:  # made already, as another pending view read it
                continue
            if isinstance(step, Iterate):
                iterate(spark, self, step)
                continue
            (statement,) = render(step)
            statement = self.substitute(statement)
            self.create_read(spark, statement)
            spark.sql(statement)

    def window_of(self, changes_view: str) -> tuple[str, int, int, bool] | None:
        """The pinned window of the source read into ``changes_view``, where the column
        bounds of its data files bound its changed rows (:mod:`.key_ranges`): its table,
        cursor, end, and whether its deletions are in the data files it removed (a window
        read through the changelog); ``None`` when unchanged or read by position."""
        if changes_view in self.appends:
            return (*self.appends[changes_view], False)
        if changes_view in self.changelog:
            return (*self.changelog[changes_view], True)
        return None

    def appends_only(self) -> bool:
        """Whether the pinned window holds appends only: every changed source is read by
        the incremental append scan."""
        changed = [v for v in self.changes_of if v not in self.unchanged]
        return bool(changed) and all(v in self.appends for v in changed)

    def substitute(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            if match[1] not in self.values:
                raise DuckstreamError(f"no value for ${{{match[1]}}} yet: plan out of order")
            return self.values[match[1]]

        return _PLACEHOLDER.sub(value, text)

    def store(self, row: dict[str, object]) -> None:
        for name, raw in row.items():
            if raw is None:
                raise DuckstreamError(f"duckstream: {name} is NULL")
            text = str(raw).lower() if isinstance(raw, bool) else str(raw)
            if not _SAFE_VALUE.match(text):
                raise DuckstreamError(f"duckstream: {name} = {text!r} is not a number or boolean")
            self.values[name] = text


def _execute(spark: SparkSession, run: Run, step: Step) -> bool:
    """Run one step; False when a :class:`StopUnless` ends the run."""
    if isinstance(step, StopUnless):
        return run.substitute(step.value).strip() == "true"
    if isinstance(step, Begin):
        # Excluded for the session and left so: restoring it would race with refreshes on
        # other threads of the same session (dbt runs models on threads).
        rules = [r.strip() for r in (spark.conf.get(EXCLUDED_RULES, None) or "").split(",")]
        if NOOP_UNION not in rules:
            spark.conf.set(EXCLUDED_RULES, ",".join([*filter(None, rules), NOOP_UNION]))
        return True
    if isinstance(step, PinWindow) and isinstance(step.spec, WindowPin):
        spec = step.spec
        if run.logs is None:
            run.logs = read_logs(spark, spec.view, [s.table for s in spec.sources])
        now, zone = None, None
        if spec.clock_filters or spec.clock_rebuilds:  # read once, here
            now, zone = now_micros(spark), spark.conf.get("spark.sql.session.timeZone", None)
        pinned = pin(spec, run.logs, now, zone)
        run.values.update(pinned.values)
        run.appends, run.unchanged = pinned.appends, pinned.unchanged
        run.positional, run.changelog = pinned.positional, pinned.changelog
        run.changes_of = {s.changes_view: s.table for s in spec.sources}
        view = run.logs[spec.view]
        run.view = spec.view
        run.pinned_view = view.current
        if view.current is not None:
            run.view_bytes = view.snapshots[view.current].count("total-files-size")
        return True
    if isinstance(step, PinSnapshot) and isinstance(step.spec, SnapshotPin):
        run.values.update(step.spec.values(spark, run.logs))
        return True
    if isinstance(step, Sql) and step.creates is not None and step.creates.name in run.appends:
        register_appends(spark, step.creates.name, *run.appends[step.creates.name])
        return True
    if isinstance(step, Sql) and step.creates is not None and step.creates.name in run.positional:
        register_positional(spark, step.creates.name, *run.positional[step.creates.name])
        return True
    if isinstance(step, Sql) and step.creates is not None and step.creates.name in run.unchanged:
        register_no_changes(spark, step.creates.name, run.unchanged[step.creates.name])
        return True
    if isinstance(step, CreateTemp | Iterate):
        run.pending[step.table.name] = step
        return True
    if isinstance(step, SetValues) and isinstance(step.spec, KeyRanges):
        run.values.update(step.spec.values(spark, run.window_of))
        return True
    if isinstance(step, PinSnapshot | PinWindow | SetValues):
        sql = run.substitute(value_query(step))
        run.create_read(spark, sql)
        rows = spark.sql(sql).collect()
        if len(rows) != 1:
            raise DuckstreamError(f"a value query returned {len(rows)} rows, not 1:\n{sql}")
        run.store(rows[0].asDict())
    elif isinstance(step, CommitWith):
        properties = {k: run.substitute(v) for k, v in step.properties}
        if run.entry is not None:
            properties[ICEBERG_PROPERTY] = run.entry().to_json()
        if run.started_ms is not None:  # the commit's own time less this: the refresh's
            properties[STARTED_PROPERTY] = str(run.started_ms)
        if run.view is None:  # a fill: the whole table replaced, consistent whatever came first
            _commit(spark, run, step, properties, None)
        else:  # a refresh: its delta applies to the view as pinned, or not at all
            with pinned_commit(spark, run.view, run.pinned_view) as branch:
                _commit(spark, run, step, properties, branch)
    else:
        for statement in render(step):
            statement = run.substitute(statement)
            run.create_read(spark, statement)
            # a SELECT only runs when collected (checks raise errors)
            spark.sql(statement).collect()
    return True


def iterate(spark: SparkSession, run: Run, step: Iterate) -> None:
    """Run the loop of ``step`` (:func:`.recursion.render_iterate`), each iteration's rows
    kept (:func:`_kept`) for the next to read, its views dropped once the result's view is
    made (that one by the plan's clean-up)."""
    first, upto_first, following, upto, last = render(step)
    made: list[str] = []
    kept: list[DataFrame] = []

    def keep(statement: str, k: int) -> bool:
        """Run a ``CREATE ... TEMPORARY VIEW name AS query`` of iteration ``k``, its rows
        kept; whether it has any."""
        text = run.substitute(statement.replace(ITERATION, str(k)).replace(PREVIOUS, str(k - 1)))
        text = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        name, query = _view(text)
        run.create_read(spark, query)
        frame, rows = _kept(spark, query)
        frame.createOrReplaceTempView(name)
        made.append(name)
        kept.append(frame)
        return rows > 0

    done = False
    try:
        found = keep(first, 0)
        keep(upto_first, 0)
        k = 0
        while found:
            k += 1
            found = keep(following, k)
            if found and k > step.bound:
                raise DuckstreamError(step.message)
            keep(upto, k)
        name, query = _view(last.replace(LAST, str(k)))
        spark.sql(query).createOrReplaceTempView(name)  # the last view's kept rows
        done = True
    finally:
        result = f"{step.table.name}_upto_{k}" if done else None
        for name, frame in zip(made, kept, strict=True):
            if name != result:
                spark.catalog.dropTempView(name)
                frame.unpersist()
            else:  # read by the plan's later statements: released after its clean-up
                run.kept.append(frame)


def _view(statement: str) -> tuple[str, str]:
    """The name and query of a ``CREATE OR REPLACE TEMPORARY VIEW name AS query``."""
    found = _VIEW.fullmatch(statement)
    if found is None:
        raise DuckstreamError(f"not a temporary view's statement: {statement[:200]}")
    return found[1], found[2]


def _kept(spark: SparkSession, query: str) -> tuple[DataFrame, int]:
    """``query``'s rows computed once and kept in memory (spilling to disk), as a frame over
    those rows, and how many. The frame reads an RDD of its own: no cached plan answers
    another query (``CACHE TABLE`` would: Spark takes an Iceberg table read at two snapshots
    for the same plan), and the next iteration's plan does not grow with the chain before it.
    (Not ``localCheckpoint``: Spark 3.5 fails computing the constraints of some unions
    there, ``key not found``.)"""
    from pyspark.sql import DataFrame

    frame = spark.sql(query)
    java = spark._jsparkSession.createDataFrame(frame._jdf.rdd(), frame._jdf.schema())
    kept = DataFrame(java, spark).persist()
    return kept, kept.count()


def _commit(
    spark: SparkSession,
    run: Run,
    step: CommitWith,
    properties: dict[str, str],
    branch: str | None,
) -> None:
    """Run ``step``'s statement (or its ``appends_only`` one) with ``properties``, into the
    view's ``branch`` when one is given."""
    if step.appends_only is not None and run.appends_only():
        insert = into_branch(run.substitute(step.appends_only), branch)
        run.create_read(spark, insert)
        try:
            sql_with_commit_properties(spark, insert, properties)
            return
        except Exception as error:  # nothing written: the general statement applies it
            if APPENDS_REMOVE not in str(error):
                raise
    if run.view is not None:  # a refresh's MERGE into the view
        spark.conf.set(GROUP_FILTER, str(run.view_bytes > SMALL_VIEW_BYTES).lower())
    statement = into_branch(run.substitute(step.statement), branch)
    run.create_read(spark, statement)
    sql_with_commit_properties(spark, statement, properties)


def _translated(error: Exception) -> Exception:
    text = str(error)
    if found := _REBUILD.search(text):
        return RebuildRequired(found[0])
    for needle, why in _ICEBERG_REBUILD.items():
        if needle in text:
            return RebuildRequired(f"{why} (Iceberg: {needle})")
    return error


def _phase_name(step: Step, committed: bool, run: Run) -> str:
    """The phase of ``step`` (:class:`~duckstream.strategy.Phase`, DuckLake's names)."""
    if isinstance(step, Cleanup):
        return "cleanup"
    if committed:
        return "after commit"
    if isinstance(step, PinWindow | PinSnapshot | StopUnless):
        return "pin"
    if isinstance(step, Sql) and step.creates is not None:
        return f"changes {run.changes_of.get(step.creates.name, step.creates.name)}"
    if isinstance(step, CommitWith):
        return "apply"
    if isinstance(step, CreateTemp):
        return "delta"
    return "begin" if isinstance(step, Begin) else "guard"


def run_steps(
    spark: SparkSession,
    steps: list[Step],
    *,
    logs: dict[str, TableLog] | None = None,
    phases: list[Phase] | None = None,
    entry: Callable[[], Entry] | None = None,
    started_ms: int | None = None,
) -> dict[str, str]:
    """Run a plan's steps in order; returns the values its value queries computed.
    :class:`Cleanup` steps run last, also after a failure. ``logs``: the sources' and the
    view's metadata already read for this refresh (:func:`.window.read_logs`; read here when
    None); ``phases``: where each step's time is added (:class:`~duckstream.strategy.Phase`);
    ``entry``: the history entry (:mod:`duckstream.history`) the view's commit carries, made
    when it commits; ``started_ms``: when the refresh started (ms since the epoch), for the
    view's commit to record (:data:`~.window.STARTED_PROPERTY`).

    Spark has no multi-statement transactions: the view's data and its cursors are one
    Iceberg commit (its :class:`CommitWith`), atomic, and nothing before it is written. A
    failure up to it raises, the view and cursors as they were; a failure after it (no plan
    has a statement there now but the clean-up) is a warning: the refresh is applied, as on
    DuckLake."""
    run = Run(logs=logs, entry=entry, started_ms=started_ms)
    failed = committed = False

    def record(step: Step, started: float) -> None:
        if phases is None:
            return
        name = _phase_name(step, committed, run)
        seconds = time.perf_counter() - started
        ran = 0 if isinstance(step, Begin | StopUnless | Applied | Commit) else 1
        if phases and phases[-1].name == name and name not in ("delta", "apply"):
            last = phases[-1]
            phases[-1] = Phase(name, last.seconds + seconds, last.statements + ran)
        else:
            phases.append(Phase(name, seconds, ran))

    try:
        for step in steps:
            if isinstance(step, Cleanup):
                continue
            started = time.perf_counter()
            try:
                if not _execute(spark, run, step):
                    record(step, started)
                    break
            except Exception as error:
                if committed:
                    warnings.warn(
                        f"duckstream: a statement after the view's commit failed ({error});"
                        " the refresh is applied",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    continue
                failed = True
                translated = _translated(error)
                if translated is error:
                    raise
                raise translated from error
            record(step, started)
            committed = committed or isinstance(step, CommitWith)
    finally:
        for step in steps:
            if isinstance(step, Cleanup):
                started = time.perf_counter()
                try:
                    spark.sql(step.statement)
                except Exception as error:
                    if not failed:  # the work is done (or stopped): never turn it into an error
                        warnings.warn(
                            f"duckstream: clean-up failed ({error}); the refresh is applied",
                            RuntimeWarning,
                            stacklevel=2,
                        )
                record(step, started)
        for frame in run.kept:
            frame.unpersist()
    return run.values


_CHANGED = re.compile(r"\.changed_[0-9]+$")


def changed_sources(values: dict[str, str]) -> tuple[int, int]:
    """How many sources a ``maintain`` run found changed, and how many it pinned: from the
    values :func:`run_steps` returned (the pin's per-source ``changed_<i>`` flags)."""
    flags = [v for k, v in values.items() if _CHANGED.search(k)]
    return sum(v == "true" for v in flags), len(flags)
