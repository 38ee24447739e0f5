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
  ``ivm_on_unsupported='full_refresh'`` is recomputed on every run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from dbt_duckstream.configs import config_problem
from dbt_duckstream.decide import BUILD, FIRST_RUN, Compiled, Decision, Found, decide
from dbt_duckstream.locate import locate
from dbt_duckstream.model import MODE_IVM, MODE_RECOMPUTE, ModelError, ModelRequest, State
from dbt_duckstream.outcome import Outcome
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

    def look(self, request: ModelRequest) -> Found:
        """Whether the table exists and the state it was built with."""
        ...

    def compile(self, request: ModelRequest) -> tuple[object, Compiled]:
        """The plan of the model (opaque to the core) and what the decision needs of it;
        raises ``UnsupportedSQLError`` / ``ViewSQLError``."""
        ...

    def same_layout(self, request: ModelRequest, plan: object) -> bool:
        """Whether the table's columns (hidden ones included) are those ``plan`` creates."""
        ...

    def build(self, request: ModelRequest, plan: object, state: State, *, replace: bool) -> None:
        """Create (``replace``) or refill the table at pinned snapshots, record the cursors
        and ``state``; in one transaction where the engine has them."""
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


def materialize(backend: Backend, request: ModelRequest) -> Outcome:
    """Build, rebuild or maintain the table of ``request``; see the module docstring."""
    started = time.perf_counter()
    problem = config_problem(
        request.name, ivm_on_unsupported=request.on_unsupported, ivm_strategy=request.strategy
    )
    if problem:
        raise ModelError(problem)
    found = backend.look(request)
    try:
        plan, compiled = backend.compile(request)
    except UnsupportedSQLError as error:
        return _done(backend, _unsupported(backend, request, error), started)
    except ViewSQLError as error:
        unreadable = UnsupportedSQLError("sql_syntax", str(error))
        return _done(backend, _unsupported(backend, request, unreadable), started)
    decision = decide(
        request, found, compiled, backend.version, lambda: backend.same_layout(request, plan)
    )
    state = State(
        MODE_IVM,
        compiled.plan_hash,
        request.sql,
        compiled.view_sql,
        list(compiled.columns),
        backend.version,
    )
    if decision.action == BUILD:
        outcome = _build(backend, request, plan, state, decision)
    else:
        outcome = _refresh(backend, request, plan, state)
    return _done(backend, outcome, started)


def _build(
    backend: Backend, request: ModelRequest, plan: object, state: State, decision: Decision
) -> Outcome:
    backend.build(request, plan, state, replace=decision.replace)
    first = decision.reason == FIRST_RUN
    return Outcome(
        action="built" if first else "rebuilt",
        reason="" if first else decision.reason,
        rows=backend.count(request),
        replaced=decision.replace,
    )


def _refresh(backend: Backend, request: ModelRequest, plan: object, state: State) -> Outcome:
    done = backend.refresh(request, plan, state)
    if done.strategy == "none":
        return Outcome(action="up to date", sources=done.sources)
    if done.strategy == "full":
        return Outcome(action="rebuilt", reason=done.reason, rows=backend.count(request))
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


def _done(backend: Backend, outcome: Outcome, started: float) -> Outcome:
    outcome.elapsed_ms = (time.perf_counter() - started) * 1000
    outcome.sql = list(backend.executed)
    return outcome
