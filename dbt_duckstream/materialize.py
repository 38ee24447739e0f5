"""What the ``incremental_ivm`` materialization does to one model, on any engine.

:func:`materialize` checks the configs, asks the engine's :class:`Backend` what it finds and
compiles, decides (:func:`dbt_duckstream.decide.decide`) and has the backend build or
refresh, and returns an :class:`~dbt_duckstream.outcome.Outcome`:

* no table yet, ``--full-refresh``, a table duckstream did not build, or one it recomputed:
  build it (create the table, fill it at pinned snapshots, record cursors and state);
* the compiled plan differs from the one the table was built with (model SQL edited, a view it
  reads redefined, a source's columns changed, a duckstream upgrade): rebuild it, in place
  when the table's columns are unchanged (so models reading it keep maintaining
  incrementally), replaced otherwise;
* otherwise refresh it: nothing to do when no source changed; else, by ``ivm_strategy``,
  apply the change feed (``incremental``), rebuild in place (``full``), or estimate and take
  the cheaper (``auto``, the default); a window the engine cannot maintain (a source
  recreated or altered, a cursor snapshot expired) is rebuilt in place. The log line says
  which ran and why;
* SQL the compiler cannot maintain fails naming the construct and its line, or with
  ``ivm_on_unsupported='full_refresh'`` is recomputed on every run;
* the model's SQL (or a view it reads) changed and ``on_configuration_change`` is ``fail``:
  the run fails, the table untouched; ``continue``: the table is maintained by the SQL it was
  built with (when that still compiles to its plan; else left as it is), with a warning;
* ``--empty`` (dbt reads every ref and source as empty): a missing table is created with the
  model's columns and no rows, recorded as built empty, so the next run builds it in full; an
  existing table is left as it is.

A plan is compiled once per model version (:mod:`dbt_duckstream.plans`) when a
:class:`~dbt_duckstream.plans.PlanCache` is given and the backend keys its plans. The outcome
keeps where the run's time went (:attr:`Outcome.phases`: look, compile or plan cached, decide,
build or refresh with the engine's own phases inside, count).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dbt_duckstream.configs import config_problem
from dbt_duckstream.decide import (
    BUILD,
    CONTINUE,
    FIRST_RUN,
    Compiled,
    Decision,
    Found,
    decide,
    held_back,
)
from dbt_duckstream.locate import locate
from dbt_duckstream.model import (
    MODE_EMPTY,
    MODE_IVM,
    MODE_RECOMPUTE,
    ModelError,
    ModelRequest,
    State,
)
from dbt_duckstream.outcome import Outcome
from dbt_duckstream.plans import CachedPlan, PlanCache
from duckstream.errors import UnsupportedSQLError, ViewSQLError


@dataclass
class Refreshed:
    """What a backend's refresh did."""

    strategy: str  # incremental | full (rebuilt in place) | none (no source changed)
    reason: str = ""  # why this strategy: the estimate (auto), the window, the config
    sources: int = 0
    sources_changed: int = 0
    inserted: int | None = None
    deleted: int | None = None
    snapshots: int | None = None


class Backend(Protocol):
    """What differs per engine. A backend holds the engine's connection and records the
    statements it executes for the model (:attr:`executed`)."""

    dialect: str  # sqlglot's name of the engine's SQL
    version: str  # duckstream's version, recorded in the state
    executed: list[str]  # the SQL statements run for the model, in order
    # the engine's phases of the build or refresh (duckstream.strategy.Phase), in order
    engine_phases: list[Any]

    def look(self, request: ModelRequest, plan: object | None = None) -> Found:
        """Whether the table exists and the state it was built with; given a cached
        ``plan``, may read what :meth:`plan_depends` asks of it in the same read."""
        ...

    def compile(self, request: ModelRequest) -> tuple[object, Compiled]:
        """The plan of the model (opaque to the core) and what the decision needs of it;
        raises ``UnsupportedSQLError`` / ``ViewSQLError``."""
        ...

    def compile_args(self, request: ModelRequest) -> tuple[str, dict[str, Any]]:
        """The view SQL ``compile`` compiles and ``compile_ivm``'s other arguments but the
        naming (what ``explain`` explains)."""
        ...

    def plan_key(self, request: ModelRequest) -> str | None:
        """What the model's plan is compiled from, as a key (:mod:`dbt_duckstream.plans`),
        from what :meth:`look` read; None: compile every run."""
        ...

    def plan_depends(self, plan: object) -> object:
        """What else ``plan`` depends on, read now (e.g. the columns of the tables it reads):
        a cached plan serves while this is unchanged."""
        ...

    def same_layout(self, request: ModelRequest, plan: object) -> bool:
        """Whether the table's columns (hidden ones included) are those ``plan`` creates."""
        ...

    def build(
        self, request: ModelRequest, plan: object, state: State, *, replace: bool, reason: str
    ) -> None:
        """Create (``replace``) or refill the table at pinned snapshots, record the cursors
        and ``state`` (and ``reason``, why it is built, in the view's history); in one
        transaction where the engine has them."""
        ...

    def refresh(self, request: ModelRequest, plan: object, state: State) -> Refreshed:
        """Bring the table up to date by ``request.strategy`` (module docstring), rebuilding
        in place (and writing ``state``) when that is chosen or needed."""
        ...

    def recompute(self, request: ModelRequest, state_of: Callable[[list[str]], State]) -> None:
        """Replace the table by the model's result, drop its cursors and record the state
        ``state_of(the result's columns)``; in one transaction where the engine has them."""
        ...

    def count(self, request: ModelRequest) -> int:
        """Rows of the table."""
        ...


def materialize(
    backend: Backend,
    request: ModelRequest,
    plans: PlanCache | None = None,
    waited: Callable[[], float] = lambda: 0.0,
) -> Outcome:
    """Build, rebuild or maintain the table of ``request``; see the module docstring.
    ``plans``: where compiled plans are kept between runs (None: compile every run);
    ``waited``: seconds the thread has waited so far for other threads' statements (an
    engine running one at a time), told apart from the model's own time in its phases."""
    clock = _Clock(waited)
    problem = config_problem(
        request.name,
        ivm_on_unsupported=request.on_unsupported,
        ivm_strategy=request.strategy,
        on_configuration_change=request.on_configuration_change,
    )
    if problem:
        raise ModelError(problem)
    key = backend.plan_key(request) if plans is not None else None
    cached = plans.load(request, key) if plans is not None and key is not None else None
    clock.lap("plan loaded")
    found = backend.look(request) if cached is None else backend.look(request, cached.plan)
    clock.lap("look")
    if request.empty:
        return _done(backend, _empty(backend, request, found), clock)
    try:
        plan, compiled = _compile(backend, request, plans, key, cached, clock)
    except (UnsupportedSQLError, ViewSQLError) as error:
        if not isinstance(error, UnsupportedSQLError):
            error = UnsupportedSQLError("sql_syntax", str(error))
        held = held_back(request, found.state, recompute=request.on_unsupported != "fail")
        if held is not None and found.state is not None:
            return _done(backend, _continue(backend, request, found.state, held, clock), clock)
        return _done(backend, _unsupported(backend, request, error), clock)
    decision = decide(
        request, found, compiled, backend.version, lambda: backend.same_layout(request, plan)
    )
    clock.lap("decide")
    state = State(
        MODE_IVM,
        compiled.plan_hash,
        request.sql,
        compiled.view_sql,
        list(compiled.columns),
        backend.version,
    )
    if decision.action == BUILD:
        outcome = _build(backend, request, plan, state, decision, clock)
    elif decision.action == CONTINUE:
        assert found.state is not None
        outcome = _continue(backend, request, found.state, decision, clock)
    else:
        outcome = _refresh(backend, request, plan, state, clock)
    return _done(backend, outcome, clock)


def _compile(
    backend: Backend,
    request: ModelRequest,
    plans: PlanCache | None,
    key: str | None,
    cached: CachedPlan | None,
    clock: _Clock,
) -> tuple[object, Compiled]:
    """The model's plan: ``cached`` (the one ``plans`` keeps under ``key``) while what else
    it depends on is unchanged; else compiled (and kept)."""
    if cached is not None and backend.plan_depends(cached.plan) == cached.depends:
        clock.lap("plan checked")
        return cached.plan, cached.compiled
    plan, compiled = backend.compile(request)
    clock.lap("compile")
    if plans is not None and key is not None:
        plans.store(request, CachedPlan(key, backend.plan_depends(plan), plan, compiled))
        clock.lap("plan stored")
    return plan, compiled


def _build(
    backend: Backend,
    request: ModelRequest,
    plan: object,
    state: State,
    decision: Decision,
    clock: _Clock,
) -> Outcome:
    backend.build(request, plan, state, replace=decision.replace, reason=decision.reason)
    clock.lap("build")
    first = decision.reason == FIRST_RUN
    rows = backend.count(request)
    clock.lap("count")
    return Outcome(
        action="built" if first else "rebuilt",
        reason="" if first else decision.reason,
        rows=rows,
        replaced=decision.replace,
    )


def _refresh(
    backend: Backend, request: ModelRequest, plan: object, state: State, clock: _Clock
) -> Outcome:
    done = backend.refresh(request, plan, state)
    clock.lap("refresh")
    if done.strategy == "none":
        return Outcome(action="up to date", sources=done.sources)
    if done.strategy == "full":
        rows = backend.count(request)
        clock.lap("count")
        return Outcome(action="rebuilt", reason=done.reason, rows=rows)
    return Outcome(
        action="incremental",
        reason=done.reason,
        inserted=done.inserted,
        deleted=done.deleted,
        sources=done.sources,
        sources_changed=done.sources_changed,
        snapshots=done.snapshots,
        rows=None if done.inserted is not None else backend.count(request),
    )


def _continue(
    backend: Backend, request: ModelRequest, built: State, decision: Decision, clock: _Clock
) -> Outcome:
    """``on_configuration_change='continue'``: refresh the table by the SQL it was built with
    (``built``), which must still compile to the plan it was built with (a view it reads may
    have been redefined since, or a source's columns changed: then the table is left as it
    is, stale, and the warning says so)."""
    as_built = replace(request, sql=built.model_sql)
    try:
        plan, compiled = backend.compile(as_built)
    except (UnsupportedSQLError, ViewSQLError):
        plan, compiled = None, None
    clock.lap("compile as built")
    not_applied = f"{decision.reason}, not applied: on_configuration_change is 'continue'"
    if plan is None or compiled is None or compiled.plan_hash != built.plan_hash:
        return Outcome(
            action="unchanged",
            reason=not_applied,
            warnings=[
                f"duckstream: model {request.name}: {decision.reason} since its table was built"
                " and on_configuration_change is 'continue'; the SQL it was built with no"
                " longer compiles to its plan, so the table is left as it is, NOT refreshed."
                " Set on_configuration_change='apply' (or run with --full-refresh) to rebuild it."
            ],
        )
    outcome = _refresh(backend, as_built, plan, built, clock)
    outcome.reason = f"{not_applied}; {outcome.reason}" if outcome.reason else not_applied
    outcome.warnings.append(
        f"duckstream: model {request.name}: {decision.reason} since its table was built and"
        " on_configuration_change is 'continue': the table is maintained by the SQL it was"
        " built with. Set on_configuration_change='apply' (or run with --full-refresh) to"
        " rebuild it from the new SQL."
    )
    return outcome


def _empty(backend: Backend, request: ModelRequest, found: Found) -> Outcome:
    """``--empty``: create a missing table from the model's SQL over empty inputs (its
    columns, no rows; recorded as built empty, so the next run builds it in full); keep one
    that exists."""
    if found.table and found.state is not None and found.state.mode != MODE_EMPTY:
        return Outcome(action="unchanged", reason="--empty: the built table is kept")
    backend.recompute(
        request,
        lambda columns: State(MODE_EMPTY, "", request.sql, request.sql, columns, backend.version),
    )
    return Outcome(action="built", reason="--empty", rows=backend.count(request), replaced=True)


def _unsupported(backend: Backend, request: ModelRequest, error: UnsupportedSQLError) -> Outcome:
    """Fail naming the construct and its line, or recompute when the model allows it."""
    where = _where(error, request, backend.dialect)
    if request.on_unsupported == "fail":
        raise ModelError(
            f"duckstream cannot maintain model {request.name} incrementally: {error.feature}"
            f" {where}: {error.message}. Rewrite the model, or set"
            " config(ivm_on_unsupported='full_refresh') to recompute it on every run."
        )
    backend.recompute(
        request,
        lambda columns: State(
            MODE_RECOMPUTE, "", request.sql, request.sql, columns, backend.version
        ),
    )
    return Outcome(
        action="recomputed",
        reason=f"{error.feature} {where} is not maintainable",
        rows=backend.count(request),
        replaced=True,
        warnings=[
            f"model {request.name} is recomputed on every run: {error.feature} {where}"
            f" cannot be maintained incrementally ({error.message})"
        ],
    )


def _where(error: UnsupportedSQLError, request: ModelRequest, dialect: str) -> str:
    line = locate(error, request.sql, request.raw_sql, dialect)
    path = request.path or "the model"
    if line is None:
        return f"in {path} or a view it reads"
    return f"at line {line} of {path}"


class _Clock:
    """The phases of one model run, lap by lap: (name, seconds, of them waiting)."""

    def __init__(self, waited: Callable[[], float]) -> None:
        self.waited = waited
        self.started = self.last = time.perf_counter()
        self.first_wait = self.last_wait = waited()
        self.phases: list[tuple[str, float, float]] = []

    def lap(self, name: str) -> None:
        now, wait = time.perf_counter(), self.waited()
        self.phases.append((name, now - self.last, wait - self.last_wait))
        self.last, self.last_wait = now, wait


def _done(backend: Backend, outcome: Outcome, clock: _Clock) -> Outcome:
    clock.lap("other")
    outcome.elapsed_ms = (clock.last - clock.started) * 1000
    outcome.waited_ms = (clock.last_wait - clock.first_wait) * 1000
    outcome.phases = clock.phases
    outcome.engine_phases = list(getattr(backend, "engine_phases", []))
    outcome.sql = list(backend.executed)
    return outcome
