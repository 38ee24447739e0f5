"""duckstream's hidden columns, kept out of what dbt sees of the tables it maintains.

A table maintained by ``incremental_ivm`` carries bookkeeping columns next to the model's
(``_ivm_row``, ``_ivm_count``, ...). Their names start with ``_ivm_``, a prefix the compiler
refuses in model SQL (``reserved_name``, any case), so in such a table every ``_ivm_*``
column is duckstream's. dbt must not see them: ``adapter.get_columns_in_relation`` feeds
``dbt_utils.star``, contracts, ``dbt docs`` and the ``table`` materialization of a model
selecting from it, which would copy them downstream (or ask duckstream to read a reserved
name). Both adapters filter their columns through :func:`visible`.

A table duckstream does not maintain keeps every column, ``_ivm_*`` or not: each adapter says
whether a table is maintained from the state duckstream keeps for it (DuckDB: the
``_ivm_state__<table>`` table beside it; Spark: its ``duckstream.*`` table properties), and is
asked only when a table has ``_ivm_*`` columns at all.

>>> from types import SimpleNamespace as Column
>>> columns = [Column(name="day"), Column(name="_ivm_row"), Column(name="_IVM_count")]
>>> [c.name for c in visible(columns, lambda: True)]
['day']
>>> [c.name for c in visible(columns, lambda: False)]
['day', '_ivm_row', '_IVM_count']
>>> visible([Column(name="day")], lambda: 1 / 0)[0].name  # not asked: nothing to hide
'day'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

PREFIX = "_ivm_"
# The table property of a Spark table duckstream maintains (dbt_duckstream.model.State.mode)
SPARK_PROPERTY = "duckstream.mode"

ColumnT = TypeVar("ColumnT")


def is_hidden(name: str) -> bool:
    """Whether ``name`` is a name duckstream reserves for its own columns."""
    return name.lower().startswith(PREFIX)


def visible(columns: Sequence[ColumnT], maintained: Callable[[], bool]) -> list[ColumnT]:
    """``columns`` (dbt columns, with ``.name``) without duckstream's hidden ones when the
    table is maintained by duckstream (``maintained()``, called only if there is a column to
    hide)."""
    if not any(is_hidden(_name(c)) for c in columns) or not maintained():
        return list(columns)
    return [c for c in columns if not is_hidden(_name(c))]


def spark_maintained(table_properties: str | None) -> bool:
    """Whether the ``Table Properties`` that Spark's ``DESCRIBE TABLE EXTENDED`` shows
    (``[k1=v1,k2=v2]``) are those of a table duckstream maintains."""
    return f"{SPARK_PROPERTY}=" in (table_properties or "")


def _name(column: Any) -> str:
    return str(column.name)
