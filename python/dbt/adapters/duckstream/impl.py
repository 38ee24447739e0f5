"""The ``duckstream`` adapter: dbt-duckdb's, plus what ``incremental_ivm`` calls from Jinja.

The macros stay thin: they run hooks, grants and docs the way dbt's own materializations do,
and hand the model to :meth:`DuckstreamAdapter.ivm_materialize`, which does the rest in
Python (:mod:`dbt.adapters.duckstream.ivm`) on the thread's own DuckDB connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbt.adapters.base.meta import available
from dbt.adapters.duckdb.impl import DuckDBAdapter
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.duckstream.connections import DuckstreamConnectionManager
from dbt.adapters.duckstream.ivm import (
    ModelError,
    ModelRequest,
    Outcome,
    equivalence_sql,
    materialize,
)
from duckstream.errors import DuckstreamError

logger = AdapterLogger("duckstream")


class DuckstreamAdapter(DuckDBAdapter):
    ConnectionManager = DuckstreamConnectionManager

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
    ) -> dict[str, Any]:
        """Build, rebuild or maintain ``relation`` from the model's SQL.

        Returns ``message`` (for the run result), ``rows`` and ``replaced`` (the table is
        new, so grants and docs must be applied again).
        """
        request = ModelRequest(
            name=str(_get(model, "name")),
            database=relation.database,
            schema=relation.schema,
            identifier=relation.identifier,
            sql=compiled_code.strip().rstrip(";").strip(),
            raw_sql=str(_get(model, "raw_code") or ""),
            path=str(_get(model, "original_file_path") or ""),
            full_refresh=bool(full_refresh),
            on_unsupported=on_unsupported or "fail",
            on_schema_change=on_schema_change or "sync_all_columns",
            strategy=strategy or "auto",
        )
        try:
            outcome = materialize(self._ivm_connection(), request)
        except (ModelError, DuckstreamError) as error:
            raise DbtRuntimeError(str(error)) from None
        self._report(relation, outcome)
        return {
            "message": outcome.message(),
            "rows": outcome.rows,
            "replaced": outcome.replaced,
        }

    @available
    def ivm_end_transaction(self) -> None:
        """Commit the transaction dbt has open on this thread, if any."""
        connection = self.connections.get_thread_connection()
        if connection.transaction_open:
            self.connections.commit()

    @available.parse_none
    def ivm_equivalence_sql(self, relation: Any, float_digits: int | None = 12) -> str:
        """The ``ivm_equivalent`` test's query for ``relation`` (see ``ivm.equivalence_sql``)."""
        request = ModelRequest(
            name=relation.identifier,
            database=relation.database,
            schema=relation.schema,
            identifier=relation.identifier,
            sql="",
        )
        return equivalence_sql(self._ivm_connection(), request, float_digits)

    @available
    def ivm_docs_differ(self, relation: Any, model: Any) -> bool:
        """Whether ``persist_docs`` would change a comment on ``relation``.

        Comments are DuckLake ALTERs: models reading this table would take one as their
        source being altered and rebuild, so they are only written when they differ.
        """
        config = _get(_get(model, "config") or {}, "persist_docs") or {}
        if not (_get(config, "relation") or _get(config, "columns")):
            return False
        con = self._ivm_connection()
        where = [relation.database, relation.schema, relation.identifier]
        row = con.execute(
            "SELECT comment FROM duckdb_tables() WHERE database_name = ? AND schema_name = ?"
            " AND table_name = ?",
            where,
        ).fetchone()
        if _get(config, "relation") and (
            row is None or (row[0] or "") != (_get(model, "description") or "")
        ):
            return True
        if _get(config, "columns"):
            current = dict(
                con.execute(
                    "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = ?"
                    " AND schema_name = ? AND table_name = ?",
                    where,
                ).fetchall()
            )
            for name, column in (_get(model, "columns") or {}).items():
                if name in current and (current[name] or "") != (_get(column, "description") or ""):
                    return True
        return False

    def _ivm_connection(self) -> Any:
        """The DuckDB cursor of this thread's connection, with no dbt transaction open.

        duckstream's statements bring their own ``BEGIN`` ... ``COMMIT``.
        """
        self.ivm_end_transaction()
        return self.connections.get_thread_connection().handle.cursor()

    def _report(self, relation: Any, outcome: Outcome) -> None:
        logger.info(f"{relation.render()} {outcome.message()}")
        for warning in outcome.warnings:
            logger.warning(warning)


def _get(thing: Any, key: str) -> Any:
    if isinstance(thing, Mapping):
        return thing.get(key)
    return getattr(thing, key, None)
