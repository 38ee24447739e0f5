"""The ``duckstream`` adapter: dbt-duckdb's, plus what ``incremental_ivm`` calls from Jinja.

The macros stay thin: they run hooks, grants and docs the way dbt's own materializations do,
and hand the model to :meth:`DuckstreamAdapter.ivm_materialize`, which does the rest in
Python: the engine-independent core (:mod:`dbt_duckstream`, whose :class:`IVMAdapter` holds
the methods both adapters share) over the DuckLake backend
(:mod:`dbt.adapters.duckstream.ivm`) on the thread's own DuckDB connection.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.base.meta import available
from dbt.adapters.duckdb.impl import DuckDBAdapter
from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.duckstream import connections
from dbt.adapters.duckstream.connections import DuckstreamConnectionManager
from dbt.adapters.duckstream.ivm import (
    DuckLakeBackend,
    ModelRequest,
    equivalence_sql,
    table_comment,
)
from dbt_duckstream import hidden
from dbt_duckstream.adapter import IVMAdapter, get
from dbt_duckstream.model import state_name
from dbt_duckstream.plans import StateCache
from duckstream.engines.ducklake.status import views_status
from duckstream.status import ViewStatus


class DuckstreamAdapter(IVMAdapter, DuckDBAdapter):
    ConnectionManager = DuckstreamConnectionManager
    ivm_logger = AdapterLogger("duckstream")

    def _ivm_backend(self) -> DuckLakeBackend:
        config = getattr(self, "config", None)  # the dbt adapter's RuntimeConfig
        target = getattr(config, "project_target_path", None)
        states = StateCache.under(target) if target else None
        return DuckLakeBackend(self._ivm_connection(), states)

    def _ivm_waited(self) -> float:
        return connections.waited()

    def _ivm_equivalence_sql(self, relation: Any, float_digits: int | None) -> str:
        request = ModelRequest(
            name=relation.identifier,
            database=relation.database,
            schema=relation.schema,
            identifier=relation.identifier,
            sql="",
        )
        return equivalence_sql(self._ivm_connection(), request, float_digits)

    def _ivm_status(self, relation: Any) -> ViewStatus | None:
        """From the DuckLake catalog's snapshot log (:mod:`duckstream.engines.ducklake.status`)."""
        if not self.ivm_maintained(relation):
            return None
        con = self._ivm_connection()
        database = relation.database or con.execute("SELECT current_database()").fetchone()[0]
        name = f"{database}.{relation.schema}.{relation.identifier}".lower()
        found = [s for s in views_status(con, database) if s.view.lower() == name]
        return found[0] if found else None

    def _ivm_expire(
        self, views: list[ViewStatus], older_than: str | None, dry_run: bool, cleanup: bool
    ) -> list[str]:
        """:func:`duckstream.engines.ducklake.expire.expire` of each catalog the views live
        in or read, on the run's connection (every catalog of the profile attached: their
        views count too)."""
        from duckstream.engines.ducklake.expire import expire
        from duckstream.status import older_than as bound_of

        older = bound_of(older_than)
        catalogs = {n.split(".", 1)[0]: None for s in views for n in (s.view, *s.cursors)}
        con = self._ivm_connection()
        lines = []
        for catalog in catalogs:
            done = expire(con, catalog, older, dry_run=dry_run, cleanup=cleanup)
            lines.append(done.text(dry_run))
        return lines

    def get_columns_in_relation(self, relation: Any) -> list[Any]:
        """dbt-duckdb's columns, without duckstream's hidden ``_ivm_*`` columns when the
        relation is a table duckstream maintains (:mod:`dbt_duckstream.hidden`): what
        ``dbt_utils.star``, contracts and downstream models see of it (``dbt docs``:
        :meth:`_ivm_visible_catalog`)."""
        columns = super().get_columns_in_relation(relation)
        return hidden.visible(columns, lambda: self.ivm_maintained(relation))

    def _get_one_catalog(self, information_schema: Any, schemas: Any, used_schemas: Any) -> Any:
        """``dbt docs``' catalog of some schemas, without hidden columns."""
        table = super()._get_one_catalog(information_schema, schemas, used_schemas)
        return self._ivm_visible_catalog(table)

    def _get_one_catalog_by_relations(
        self, information_schema: Any, relations: Any, used_schemas: Any
    ) -> Any:
        """``dbt docs``' catalog of some relations, without hidden columns."""
        table = super()._get_one_catalog_by_relations(information_schema, relations, used_schemas)
        return self._ivm_visible_catalog(table)

    def _ivm_visible_catalog(self, table: Any) -> Any:
        """The rows of a catalog (an agate table, a row per column) but those of hidden
        columns of the tables duckstream maintains."""
        maintained: dict[tuple[str, str, str], bool] = {}

        def shown(row: Any) -> bool:
            if not hidden.is_hidden(str(row["column_name"] or "")):
                return True
            key = (row["table_database"], row["table_schema"], row["table_name"])
            if key not in maintained:
                relation = self.Relation.create(*key)
                maintained[key] = self.ivm_maintained(relation)
            return not maintained[key]

        return table.where(shown)

    def ivm_maintained(self, relation: Any) -> bool:
        """Whether ``relation`` is a table duckstream maintains: its state table
        ``_ivm_state__<name>`` sits beside it."""
        if not relation.identifier:
            return False
        cursor = self.connections.get_thread_connection().handle.cursor()
        # duckdb_columns(), not duckdb_tables(): see dbt.adapters.duckstream.ivm._existing
        row = cursor.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = coalesce(?,"
            " current_database()) AND schema_name = coalesce(?, current_schema())"
            " AND table_name = ?",
            [relation.database, relation.schema, state_name(relation.identifier)],
        ).fetchone()
        return bool(row and row[0])

    @available
    def ivm_docs_differ(self, relation: Any, model: Any) -> bool:
        """Whether ``persist_docs`` would change a comment on ``relation``.

        Comments are DuckLake ALTERs: models reading this table would take one as their
        source being altered and rebuild, so they are only written when they differ.
        """
        config = get(get(model, "config") or {}, "persist_docs") or {}
        if not (get(config, "relation") or get(config, "columns")):
            return False
        con = self._ivm_connection()
        where = [relation.database, relation.schema, relation.identifier]
        if get(config, "relation") and (table_comment(con, *where) or "") != (
            get(model, "description") or ""
        ):
            return True
        if get(config, "columns"):
            current = dict(
                con.execute(
                    "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = ?"
                    " AND schema_name = ? AND table_name = ?",
                    where,
                ).fetchall()
            )
            for name, column in (get(model, "columns") or {}).items():
                if name in current and (current[name] or "") != (get(column, "description") or ""):
                    return True
        return False

    def _ivm_connection(self) -> Any:
        """The DuckDB cursor of this thread's connection, with no dbt transaction open.

        duckstream's statements bring their own ``BEGIN`` ... ``COMMIT``.
        """
        self.ivm_end_transaction()
        return self.connections.get_thread_connection().handle.cursor()
