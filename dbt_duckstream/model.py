"""One model to materialize, and the state its table was built with.

Both engines keep the same :class:`State` record (DuckDB in ``_ivm_state__<model>`` beside the
table, Spark in the table's ``duckstream.*`` properties, which commit no Iceberg snapshot) and
identify a plan by the same :func:`plan_hash`.

>>> request = ModelRequest("totals", "lake", "main", "totals", "SELECT 1 AS x")
>>> request.cursors_name, request.state_name
('_ivm_cursors__totals', '_ivm_state__totals')
>>> state = State("ivm", "ab12", "SELECT 1 AS x", "SELECT 1 AS x", ["x"], "0.1.0")
>>> State.from_record(state.record()) == state
True
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

MODE_IVM = "ivm"
MODE_RECOMPUTE = "recompute"
MODE_EMPTY = "empty"  # built by ``dbt run --empty``: the model's columns, no rows, no cursors
PLAN_HASH_LENGTH = 64  # hex characters of a sha256, on both engines


class ModelError(Exception):
    """The model cannot be materialized as asked; the message says why and what to do."""


@dataclass(frozen=True)
class ModelRequest:
    """One model to materialize: where its table goes and the SQL it is defined by.

    ``database`` is the catalog (DuckDB: the DuckLake catalog's alias; Spark: empty, the
    session's current catalog)."""

    name: str
    database: str
    schema: str
    identifier: str
    sql: str
    raw_sql: str = ""
    path: str = ""
    full_refresh: bool = False
    on_unsupported: str = "fail"
    on_schema_change: str = "sync_all_columns"
    strategy: str = "auto"  # ivm_strategy: auto | incremental | full
    # what to do when the model's SQL (or a view it reads) changed: apply | continue | fail
    on_configuration_change: str = "apply"
    empty: bool = False  # dbt's --empty: build the table's shape from sources read as empty
    max_recursion_depth: int = 1000  # ivm_max_recursion_depth: steps of a UNION ALL recursion

    @property
    def cursors_name(self) -> str:
        return f"_ivm_cursors__{self.identifier}"

    @property
    def state_name(self) -> str:
        return state_name(self.identifier)


def state_name(identifier: str) -> str:
    """The table beside a model's table holding its :class:`State` (DuckDB)."""
    return f"_ivm_state__{identifier}"


class _Plan(Protocol):
    create_mv: str
    initialize_cursors: list[str]
    maintain: list[str]
    query_mv: str


@dataclass(frozen=True)
class State:
    """What a model's table was built with: the record ``_ivm_state__<model>`` (DuckDB) or
    the ``duckstream.*`` table properties (Spark) hold."""

    mode: str  # ivm | recompute | empty
    plan_hash: str  # "" when recomputed
    model_sql: str
    view_sql: str  # the model SQL with the views it reads inlined (DuckDB; Spark: model SQL)
    columns: list[str]  # visible columns
    version: str  # duckstream's

    FIELDS = ("mode", "plan_hash", "model_sql", "view_sql", "columns", "version")

    def record(self) -> dict[str, str]:
        """The state as text fields (``columns`` as JSON), in :attr:`FIELDS` order."""
        return {
            "mode": self.mode,
            "plan_hash": self.plan_hash,
            "model_sql": self.model_sql,
            "view_sql": self.view_sql,
            "columns": json.dumps(self.columns),
            "version": self.version,
        }

    @classmethod
    def from_record(cls, found: dict[str, Any]) -> State | None:
        """The state of a record :meth:`record` wrote; ``None`` if it is not one."""
        try:
            return cls(
                mode=str(found["mode"]),
                plan_hash=str(found["plan_hash"]),
                model_sql=str(found["model_sql"]),
                view_sql=str(found.get("view_sql") or found["model_sql"]),
                columns=list(json.loads(found["columns"])),
                version=str(found["version"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def plan_hash(plan: _Plan) -> str:
    """Identifies the plan: the SQL that creates, fills and maintains the table (sha256).

    >>> class Plan:
    ...     create_mv, initialize_cursors, maintain, query_mv = "c", ["i"], ["m"], "q"
    >>> len(plan_hash(Plan())) == PLAN_HASH_LENGTH
    True
    """
    parts = [plan.create_mv, plan.initialize_cursors, plan.maintain, plan.query_mv]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def statement(sql: str) -> str:
    """The model SQL as dbt compiled it, without the trailing ``;``."""
    return sql.strip().rstrip(";").strip()
