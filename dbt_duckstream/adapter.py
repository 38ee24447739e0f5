"""The adapter methods the ``incremental_ivm`` macros call, the same for both adapters.

``dbt.adapters.duckstream`` (dbt-duckdb's adapter) and ``dbt.adapters.duckstream_spark``
(dbt-spark's) subclass their dbt adapter and :class:`IVMAdapter`, and give it the engine's
:class:`~dbt_duckstream.materialize.Backend` (:meth:`IVMAdapter._ivm_backend`) and the
``ivm_equivalent`` test's query (:meth:`IVMAdapter._ivm_equivalence_sql`). The log line goes
to dbt's log at info level, and the SQL the model ran at debug level; the macro writes that
SQL under ``target/run/`` as dbt does for a materialization's ``statement('main')``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dbt.adapters.base import AdapterPlugin
from dbt.adapters.base.meta import AdapterMeta, available
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt_duckstream.lag import lag_sql
from dbt_duckstream.materialize import Backend, materialize
from dbt_duckstream.model import ModelError, ModelRequest, statement
from dbt_duckstream.outcome import log_line
from dbt_duckstream.plans import PlanCache
from duckstream.errors import DuckstreamError
from duckstream.explain import explain
from duckstream.status import ViewStatus, status_text


def plugin(adapter: Any, credentials: Any, include_path: str, dependency: str) -> AdapterPlugin:
    """The ``Plugin`` of a duckstream adapter: ``adapter`` extends the adapter of type
    ``dependency`` (whose macros it inherits), ships the include project ``dbt_duckstream``
    (the repository's root ``dbt_project.yml`` and ``macros/``, at ``include_path``).

    dbt treats a project as an adapter's internal one when its name is the plugin's
    ``project_name``, and does not let models address internal macros by package name; under
    another ``project_name`` it is loaded as an ordinary package, so ``data_tests:
    [dbt_duckstream.ivm_equivalent]`` resolves with the adapter alone and no packages.yml.
    dbt loads the include projects of the profile's adapter (and its dependencies) only, so
    with both adapters installed there is still one ``dbt_duckstream`` per run.
    """
    return AdapterPlugin(
        adapter=adapter,
        credentials=credentials,
        include_path=include_path,
        dependencies=[dependency],
        project_name=f"dbt_{adapter.type()}_adapter",
    )


def request_from(relation: Any, compiled_code: str, model: Any, **configs: Any) -> ModelRequest:
    """The :class:`ModelRequest` of a dbt model (``relation``: its target relation)."""
    return ModelRequest(
        name=str(get(model, "name")),
        database=relation.database or "",
        schema=relation.schema,
        identifier=relation.identifier,
        sql=statement(compiled_code),
        raw_sql=str(get(model, "raw_code") or ""),
        path=str(get(model, "original_file_path") or ""),
        full_refresh=bool(configs.get("full_refresh")),
        on_unsupported=configs.get("on_unsupported") or "fail",
        on_schema_change=configs.get("on_schema_change") or "sync_all_columns",
        strategy=configs.get("strategy") or "auto",
        on_configuration_change=_text(configs.get("on_configuration_change")) or "apply",
        empty=bool(configs.get("empty")),
        max_recursion_depth=int(configs.get("max_recursion_depth") or 1000),
    )


def _text(value: Any) -> str | None:
    """A config's value as text (dbt hands ``on_configuration_change`` over as an enum)."""
    return None if value is None else str(getattr(value, "value", value))


class IVMAdapter(metaclass=AdapterMeta):
    """Mixed into a dbt adapter class before the dbt adapter it extends."""

    ivm_logger: AdapterLogger

    def _ivm_backend(self) -> Backend:
        """The engine's backend on this thread's connection."""
        raise NotImplementedError

    def _ivm_equivalence_sql(self, relation: Any, float_digits: int | None) -> str:
        raise NotImplementedError

    @available
    def ivm_materialize(
        self,
        relation: Any,
        compiled_code: str,
        model: Any,
        full_refresh: bool = False,
        on_unsupported: str | None = None,
        on_schema_change: str | None = None,
        strategy: str | None = None,
        on_configuration_change: Any = None,
        empty: bool = False,
        max_recursion_depth: int | None = None,
    ) -> dict[str, Any]:
        """Build, rebuild or maintain ``relation`` from the model's SQL (``empty``: dbt's
        ``--empty``, which reads every ref and source as empty).

        Returns ``message`` (for the run result), ``rows``, ``replaced`` (the table is new,
        so grants and docs must be applied again), ``docs_differ`` (``persist_docs`` would
        change a comment: the model's time includes finding out) and ``sql`` (the statements
        it ran, one script, for ``target/run/``).
        """
        request = request_from(
            relation,
            compiled_code,
            model,
            full_refresh=full_refresh,
            on_unsupported=on_unsupported,
            on_schema_change=on_schema_change,
            strategy=strategy,
            on_configuration_change=on_configuration_change,
            empty=empty,
            max_recursion_depth=max_recursion_depth,
        )
        try:
            outcome = materialize(self._ivm_backend(), request, self._ivm_plans(), self._ivm_waited)
        except (ModelError, DuckstreamError) as error:
            raise DbtRuntimeError(str(error)) from None
        started, waited = time.perf_counter(), self._ivm_waited()
        docs_differ = outcome.replaced or self.ivm_docs_differ(relation, model)
        outcome.add_phase("docs", time.perf_counter() - started, self._ivm_waited() - waited)
        script = outcome.script(request.name)
        self.ivm_logger.info(log_line(relation.render(), outcome))
        self.ivm_logger.debug(f"duckstream phases of {relation.render()}: {outcome.profile()}")
        self.ivm_logger.debug(f"duckstream SQL of {relation.render()}:\n{script}")
        for warning in outcome.warnings:
            self.ivm_logger.warning(warning)
        return {
            "message": outcome.message(),
            "rows": outcome.rows,
            "replaced": outcome.replaced,
            "docs_differ": docs_differ,
            "sql": script,
        }

    def ivm_docs_differ(self, relation: Any, model: Any) -> bool:
        """Whether ``persist_docs`` would change a comment on ``relation`` (each adapter's)."""
        raise NotImplementedError

    def _ivm_waited(self) -> float:
        """Seconds this thread has waited so far for other threads' statements (an engine
        that runs one statement at a time per process: DuckDB with DuckLake)."""
        return 0.0

    def _ivm_plans(self) -> PlanCache | None:
        """Where compiled plans are kept between runs: under dbt's target path."""
        config = getattr(self, "config", None)  # the dbt adapter's RuntimeConfig
        target = getattr(config, "project_target_path", None)
        return PlanCache.under(target) if target else None

    @available
    def ivm_end_transaction(self) -> None:
        """Commit the transaction dbt has open on this thread, if any (duckstream's
        statements bring their own; Spark has none, only dbt's bookkeeping)."""
        connections = self.connections  # ty: ignore[missing-attribute]  (the dbt adapter's)
        if connections.get_thread_connection().transaction_open:
            connections.commit()

    @available.parse_none
    def ivm_explain(self, relation: Any) -> str:
        """How the model whose table is ``relation`` is maintained (:mod:`duckstream.explain`),
        from the SQL it was last built with (its state), logged at info level: ``dbt
        run-operation duckstream_explain --args '{model: <name>}'``."""
        backend = self._ivm_backend()
        request = ModelRequest(
            name=relation.identifier,
            database=relation.database or "",
            schema=relation.schema,
            identifier=relation.identifier,
            sql="",
        )
        try:
            found = backend.look(request)
            if found.state is None or found.state.mode != "ivm":
                raise ModelError(
                    f"duckstream_explain: {relation.render()} was not built by duckstream's"
                    " incremental_ivm (run the model first)"
                )
            view_sql, arguments = backend.compile_args(replace(request, sql=found.state.model_sql))
            text = explain(view_sql, **arguments).text()
        except (ModelError, DuckstreamError) as error:
            raise DbtRuntimeError(str(error)) from None
        self.ivm_logger.info(f"duckstream explain of {relation.render()}:\n{text}")
        return text

    def _ivm_status(self, relation: Any) -> ViewStatus | None:
        """``relation``'s cursors, lag and recent refreshes (:mod:`duckstream.status`); None
        when it is not a table duckstream maintains."""
        raise NotImplementedError

    @available.parse_none
    def ivm_lag_sql(
        self, relation: Any, max_snapshots: int | None = None, max_seconds: float | None = None
    ) -> str:
        """The ``ivm_lag`` test's query for ``relation`` (:mod:`dbt_duckstream.lag`)."""
        try:
            found = self._ivm_status(relation)
        except DuckstreamError as error:
            raise DbtRuntimeError(str(error)) from None
        return lag_sql(relation.render(), found, max_snapshots, max_seconds)

    @available.parse_none
    def ivm_status(self, relations: list[Any]) -> str:
        """``python -m duckstream status`` of ``relations`` (those duckstream maintains),
        logged at info level: ``dbt run-operation duckstream_status``."""
        found = [s for s in (self._ivm_status(r) for r in relations) if s is not None]
        text = status_text(found)
        self.ivm_logger.info(f"duckstream status:\n{text}")
        return text

    @available.parse_none
    def ivm_expire(
        self,
        relations: list[Any],
        older_than: str | None = None,
        dry_run: bool = False,
        cleanup: bool = False,
    ) -> str:
        """Expire the snapshots no model needs in the catalogs ``relations`` (the project's
        models) live in and read, logged at info level: ``dbt run-operation
        duckstream_expire``."""
        found = [s for s in (self._ivm_status(r) for r in relations) if s is not None]
        try:
            lines = self._ivm_expire(found, older_than, dry_run, cleanup)
        except (DuckstreamError, ValueError) as error:
            raise DbtRuntimeError(str(error)) from None
        text = "\n".join(lines) or "no catalog holds a model duckstream maintains"
        self.ivm_logger.info(f"duckstream expire:\n{text}")
        return text

    def _ivm_expire(
        self, views: list[ViewStatus], older_than: str | None, dry_run: bool, cleanup: bool
    ) -> list[str]:
        """Expire the snapshots that no maintained view needs where ``views`` (the project's
        built models) live and read; a line per catalog or table."""
        raise NotImplementedError

    @available.parse_none
    def ivm_equivalence_sql(self, relation: Any, float_digits: int | None = 12) -> str:
        """The ``ivm_equivalent`` test's query for ``relation``
        (:mod:`dbt_duckstream.equivalence`)."""
        return self._ivm_equivalence_sql(relation, float_digits)


def get(thing: Any, key: str) -> Any:
    """``key`` of a dbt node or config, which Jinja hands over as a mapping or an object."""
    if isinstance(thing, Mapping):
        return thing.get(key)
    return getattr(thing, key, None)
