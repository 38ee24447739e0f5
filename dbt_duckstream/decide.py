"""Build, rebuild or maintain: the decision for one model run, and its reason.

Pure: the backend says what it found (does the table exist, the :class:`~.model.State` it
was built with) and compiled (the plan's hash and columns); the decision is the same on
both engines.

>>> from dbt_duckstream.model import ModelRequest, State
>>> request = ModelRequest("totals", "lake", "main", "totals", "SELECT 1 AS x")
>>> decide(request, Found(table=False), Compiled("h", ["x"], request.sql), "1")
Decision(action='build', reason='first run', replace=True)
>>> state = State("ivm", "h", request.sql, request.sql, ["x"], "1")
>>> decide(request, Found(True, state), Compiled("h", ["x"], request.sql), "1").action
'maintain'
>>> edited = ModelRequest("totals", "lake", "main", "totals", "SELECT 2 AS x")
>>> decide(edited, Found(True, state), Compiled("h2", ["x"], edited.sql), "1", lambda: True)
Decision(action='build', reason='model SQL changed', replace=False)
>>> kept = ModelRequest("totals", "lake", "main", "totals", "SELECT 2 AS x",
...                     on_configuration_change="continue")
>>> decide(kept, Found(True, state), Compiled("h2", ["x"], kept.sql), "1")
Decision(action='continue', reason='model SQL changed', replace=False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dbt_duckstream.model import MODE_EMPTY, MODE_IVM, ModelError, ModelRequest, State

BUILD = "build"  # create (replace) or refill the table, record cursors and state
MAINTAIN = "maintain"  # refresh it: apply the change feed, or rebuild in place (strategy)
# on_configuration_change='continue': keep maintaining the table as it was built (the change
# is not applied)
CONTINUE = "continue"
FIRST_RUN = "first run"
BUILT_EMPTY = "built empty by --empty"
MODEL_SQL_CHANGED = "model SQL changed"
VIEW_REDEFINED = "a view the model reads was redefined"
# The changes the user made (dbt's "configuration changes" of a materialized view), which
# on_configuration_change governs; the others (a source's columns, a duckstream upgrade)
# leave no choice: the old plan cannot maintain the table any more, or is gone.
USER_CHANGES = (MODEL_SQL_CHANGED, VIEW_REDEFINED)


@dataclass(frozen=True)
class Found:
    """The model's table as the run finds it."""

    table: bool  # it exists
    state: State | None = None  # the state it was built with, if duckstream built it


@dataclass(frozen=True)
class Compiled:
    """What this run compiled: the plan's hash, its visible columns and the SQL it is of."""

    plan_hash: str
    columns: list[str]
    view_sql: str  # the model SQL with the views it reads inlined


@dataclass(frozen=True)
class Decision:
    action: str  # build | maintain
    reason: str = ""
    replace: bool = False  # build: create the table anew (else refill it in place)


def decide(
    request: ModelRequest,
    found: Found,
    compiled: Compiled,
    version: str,
    same_layout: Callable[[], bool] = lambda: False,
) -> Decision:
    """Why the table must be (re)built, and whether replaced; else maintain it.

    ``same_layout``: whether the table's columns are those the plan creates (asked only when
    the plan changed): a rebuild then refills the table in place, which keeps its identity
    (DuckLake table id, Iceberg history) and with it the cursors of models reading it.
    ``ivm_strategy`` is the refresh's business (:func:`dbt_duckstream.materialize`): ``full``
    rebuilds in place when a source changed, like a rebuild chosen by ``auto``.
    """
    state = found.state
    if not found.table:
        return Decision(BUILD, FIRST_RUN, replace=True)
    if request.full_refresh:
        return Decision(BUILD, "full refresh", replace=True)
    if state is None:
        return Decision(BUILD, "table not built by incremental_ivm", replace=True)
    if state.mode == MODE_EMPTY:
        return Decision(BUILD, BUILT_EMPTY, replace=True)
    if state.mode != MODE_IVM:
        return Decision(BUILD, "was recomputed, now maintainable", replace=True)
    if state.plan_hash != compiled.plan_hash:
        reason = why_changed(request, state, compiled, version)
        if reason in USER_CHANGES and request.on_configuration_change == "fail":
            raise ModelError(configuration_change_failed(request, reason))
        if reason in USER_CHANGES and request.on_configuration_change == CONTINUE:
            return Decision(CONTINUE, reason)
        check_schema_change(request, state, compiled.columns)
        return Decision(BUILD, reason, not same_layout())
    return Decision(MAINTAIN)


def held_back(request: ModelRequest, state: State | None, *, recompute: bool) -> Decision | None:
    """``on_configuration_change`` for a maintained model whose edited SQL cannot be maintained
    (``recompute``: ``ivm_on_unsupported`` would replace the table by a recomputation):
    ``continue`` keeps maintaining the table by the SQL it was built with; ``fail`` fails
    rather than let the table be replaced. None: no edit held back (the unsupported SQL fails
    naming its construct, or is recomputed as configured).

    >>> from dbt_duckstream.model import State
    >>> built = State("ivm", "h", "SELECT 1 AS x", "SELECT 1 AS x", ["x"], "1")
    >>> edited = ModelRequest("t", "lake", "main", "t", "SELECT 2 AS x",
    ...                       on_configuration_change="continue")
    >>> held_back(edited, built, recompute=False)
    Decision(action='continue', reason='model SQL changed', replace=False)
    """
    if state is None or state.mode != MODE_IVM or state.model_sql == request.sql:
        return None
    if request.full_refresh or request.on_configuration_change == "apply":
        return None
    if request.on_configuration_change == CONTINUE:
        return Decision(CONTINUE, MODEL_SQL_CHANGED)
    if recompute:  # fail: the table is not to be replaced
        raise ModelError(configuration_change_failed(request, MODEL_SQL_CHANGED))
    return None


def configuration_change_failed(request: ModelRequest, reason: str) -> str:
    """The error of a run whose model changed while ``on_configuration_change`` is 'fail'."""
    table = ".".join(p for p in (request.database, request.schema, request.identifier) if p)
    return (
        f"duckstream: model {request.name}: {reason} since {table} was built, and"
        " on_configuration_change is 'fail': the table is left as it was. Set"
        " on_configuration_change='apply' to rebuild it (or 'continue' to keep maintaining it"
        " as it was built), or run with --full-refresh."
    )


def why_changed(request: ModelRequest, state: State, compiled: Compiled, version: str) -> str:
    """Why the plan differs from the one the table was built with."""
    if state.model_sql != request.sql:
        return MODEL_SQL_CHANGED
    if state.view_sql != compiled.view_sql:
        return VIEW_REDEFINED
    if state.version != version:
        return f"duckstream {state.version} -> {version} compiles the model differently"
    return "the columns of a table it reads changed"


def check_schema_change(request: ModelRequest, state: State, columns: list[str]) -> None:
    """``on_schema_change='fail'`` stops a run whose model's columns changed."""
    if request.on_schema_change == "fail" and state.columns != list(columns):
        raise ModelError(
            f"model {request.name}: its columns changed from {state.columns} to"
            f" {list(columns)} and on_schema_change is 'fail'. Run with"
            " --full-refresh to rebuild it."
        )
