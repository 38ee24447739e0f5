"""Run a Spark plan: ``setup(spark, plan)`` once, then ``refresh(spark, plan)``.

Spark SQL takes no run-time values where a refresh needs them (``VERSION AS OF``, ``CALL``
arguments) and has no multi-statement transactions, so a Spark plan is plain Spark SQL plus
four directives, written as leading comment lines. To run a plan by hand, go through the
statements in order and:

``-- duckstream: set``
    Run the query (one row). Each column is a value named by its alias: ``SET <alias> =
    <value>``. Later statements use it as ``${<alias>}``, which Spark substitutes itself.
``-- duckstream: stop unless ${x}``
    If ``x`` is false, nothing changed: skip to the ``finally`` statements.
``-- duckstream: snapshot property <key> = <value>``
    The statement below must commit with these Iceberg snapshot properties. Spark SQL has
    no syntax for that; :func:`duckstream.spark.sql_with_commit_properties` does it. These
    are the view's cursors, committed together with the view's data.
``-- duckstream: finally``
    Cleanup: runs after every other statement, also when one failed.

This module does exactly that, substituting ``${...}`` itself (so it does not depend on
``spark.sql.variable.substitute`` or change the session configuration), and raises
:class:`RebuildRequired` when a refresh cannot read its window from Iceberg.

``refresh(spark, plan)`` (``strategy="auto"``) first estimates the window from Iceberg
metadata (:mod:`duckstream.spark.estimate`) and runs ``maintain`` or ``initialize_cursors``
(the atomic full rebuild: the view's data and cursors in one commit), whichever is cheaper,
like :func:`duckstream.strategy.refresh` on DuckLake.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from duckstream.cost import Policy, RefreshReport
from duckstream.engines.spark_dialect import DIRECTIVE
from duckstream.errors import DuckstreamError, RebuildRequired
from duckstream.plan import IVMPlan
from duckstream.spark.estimate import choose
from duckstream.spark.session import sql_with_commit_properties
from duckstream.strategy import STRATEGIES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PLACEHOLDER = re.compile(r"\$\{(duckstream\.[A-Za-z0-9_.]+)\}")
_SAFE_VALUE = re.compile(r"^-?[0-9]+$|^true$|^false$")
_REBUILD = re.compile(r"duckstream: rebuild required: [^\n]*")
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
class Statement:
    """One entry of a plan: its directives and its SQL (empty for a pure directive)."""

    directives: list[str]
    sql: str

    @classmethod
    def parse(cls, text: str) -> Statement:
        directives, lines = [], text.splitlines()
        while lines and lines[0].startswith(DIRECTIVE):
            directives.append(lines.pop(0)[len(DIRECTIVE) :].strip())
        return cls(directives, "\n".join(lines).strip())


@dataclass
class Run:
    """Values computed so far by ``set`` queries, keyed by their ``${...}`` names."""

    values: dict[str, str] = field(default_factory=dict)

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


def _properties(directives: list[str]) -> dict[str, str]:
    found = {}
    for d in directives:
        if d.startswith("snapshot property "):
            key, _, value = d.removeprefix("snapshot property ").partition("=")
            found[key.strip()] = value.strip()
    return found


def _execute(spark: SparkSession, run: Run, statement: Statement) -> bool:
    """Run one statement; False when a ``stop unless`` directive ends the run."""
    for d in statement.directives:
        if d.startswith("stop unless "):
            return run.substitute(d.removeprefix("stop unless ")).strip() == "true"
    sql = run.substitute(statement.sql)
    properties = {k: run.substitute(v) for k, v in _properties(statement.directives).items()}
    if "set" in statement.directives:
        rows = spark.sql(sql).collect()
        if len(rows) != 1:
            raise DuckstreamError(f"a `set` query returned {len(rows)} rows, not 1:\n{sql}")
        run.store(rows[0].asDict())
    elif properties:
        sql_with_commit_properties(spark, sql, properties)
    else:
        spark.sql(sql).collect()  # a SELECT only runs when collected (checks raise errors)
    return True


def _translated(error: Exception) -> Exception:
    text = str(error)
    if found := _REBUILD.search(text):
        return RebuildRequired(found[0])
    for needle, why in _ICEBERG_REBUILD.items():
        if needle in text:
            return RebuildRequired(f"{why} (Iceberg: {needle})")
    return error


def run_statements(spark: SparkSession, statements: list[str]) -> dict[str, str]:
    """Run a plan's statement list in order, honouring its directives; returns the values
    its ``set`` queries computed. ``finally`` statements run last, also after a failure."""
    run = Run()
    parsed = [Statement.parse(s) for s in statements]
    failed = False
    try:
        for statement in parsed:
            if "finally" in statement.directives:
                continue
            try:
                if not _execute(spark, run, statement):
                    break
            except Exception as error:
                failed = True
                translated = _translated(error)
                if translated is error:
                    raise
                raise translated from error
    finally:
        for statement in parsed:
            if "finally" in statement.directives:
                try:
                    spark.sql(statement.sql)
                except Exception:
                    if not failed:  # never hide the error that stopped the run
                        raise
    return run.values


_CHANGED = re.compile(r"\.changed_[0-9]+$")


def changed_sources(values: dict[str, str]) -> tuple[int, int]:
    """How many sources a ``maintain`` run found changed, and how many it pinned: from the
    values :func:`run_statements` returned (the pin's per-source ``changed_<i>`` flags)."""
    flags = [v for k, v in values.items() if _CHANGED.search(k)]
    return sum(v == "true" for v in flags), len(flags)


def setup(spark: SparkSession, plan: IVMPlan) -> dict[str, str]:
    """Create the cursors table and the view's table, and fill it at pinned snapshots."""
    spark.sql(plan.create_cursors_table)
    spark.sql(plan.create_mv)
    return run_statements(spark, plan.initialize_cursors)


def refresh(
    spark: SparkSession,
    plan: IVMPlan,
    *,
    rebuild: bool = False,
    strategy: str = "auto",
    policy: Policy | None = None,
) -> RefreshReport:
    """Bring the view up to date with ``strategy`` and report what ran and why.

    ``incremental`` applies every change committed to the sources since the last refresh, in
    one commit of the view's table (or none if nothing changed), and raises
    :class:`RebuildRequired` for a window Iceberg cannot read, unless ``rebuild=True``: then
    it re-initializes the view. ``full`` re-initializes it. ``auto`` (the default) estimates
    the window from Iceberg metadata (:func:`duckstream.spark.estimate.choose`, with
    ``policy``) and runs the cheaper of the two, rebuilding whenever maintaining is
    impossible.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    start = time.perf_counter()
    if strategy == "auto":
        report = choose(spark, plan, policy)
    else:
        report = RefreshReport(strategy, strategy, "requested")
    if report.strategy == "incremental":
        try:
            run_statements(spark, plan.maintain)
        except RebuildRequired as error:
            if strategy == "incremental" and not rebuild:
                raise
            report.strategy = "full"
            report.reason = error.reason
    if report.strategy == "full":
        run_statements(spark, plan.initialize_cursors)
    report.elapsed = time.perf_counter() - start
    return report
