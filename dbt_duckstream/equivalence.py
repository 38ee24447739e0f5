"""The ``ivm_equivalent`` test's query: where a table and a recomputation of its SQL differ.

Symmetric ``EXCEPT ALL`` over the visible columns (set operations compare NULLs as equal),
with an ``_ivm_side`` column saying whether the row is ``missing`` from the table or
``unexpected`` in it. A model that chooses among rows tied in its ORDER BY (LIMIT, DISTINCT
ON) is recomputed with the tie-break the table keeps (``break_ties``). Floating-point columns
are compared to ``float_digits`` significant digits (``None``: exactly): a sum of doubles
maintained change by change is rounded in another order than a recomputation's. Without state the query returns one row saying so.

>>> from dbt_duckstream.model import State
>>> state = State("ivm", "h", "SELECT 1.5 AS x", "", ["x"], "1")
>>> print(equivalence_sql('"t"', state, {"x": "DOUBLE"}, dialect="duckdb", float_digits=None))
WITH _ivm_actual AS (SELECT "x" AS "x" FROM "t"),
_ivm_expected AS (SELECT "x" AS "x" FROM (
SELECT 1.5 AS x
) AS _ivm_model)
SELECT 'missing' AS _ivm_side, * FROM (SELECT * FROM _ivm_expected EXCEPT ALL SELECT * FROM _ivm_actual) AS _ivm_m
UNION ALL
SELECT 'unexpected' AS _ivm_side, * FROM (SELECT * FROM _ivm_actual EXCEPT ALL SELECT * FROM _ivm_expected) AS _ivm_u
"""  # noqa: E501

from __future__ import annotations

from sqlglot import exp

from dbt_duckstream.model import State
from duckstream.normalize.number_rows import break_ties_sql

FLOAT_TYPES = frozenset({"DOUBLE", "FLOAT", "REAL"})


def quote(name: str, dialect: str) -> str:
    """``name`` as a quoted identifier of ``dialect``."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


def literal(value: str, dialect: str) -> str:
    """``value`` as a string literal of ``dialect``."""
    return exp.Literal.string(value).sql(dialect=dialect)


def no_state_sql(table: str, dialect: str) -> str:
    """The test's query for a table duckstream did not build: one row saying so."""
    note = f"{table} has no duckstream state: it was not built by incremental_ivm"
    return f"SELECT {literal(note, dialect)} AS _ivm_side"


def equivalence_sql(
    table: str,
    state: State | None,
    types: dict[str, str],
    *,
    dialect: str,
    float_digits: int | None = 12,
) -> str:
    """The query for ``table`` (a rendered name), built with ``state``; ``types``: the
    table's column types (upper or lower case)."""
    if state is None:
        return no_state_sql(table, dialect)
    # a model that chooses among tied rows (LIMIT, DISTINCT ON): the choice the table keeps
    expected = break_ties_sql(state.model_sql, dialect, len(state.columns))
    columns = ", ".join(
        f"{compared(c, types.get(c, ''), float_digits, dialect)} AS {quote(c, dialect)}"
        for c in state.columns
    )
    return (
        f"WITH _ivm_actual AS (SELECT {columns} FROM {table}),\n"
        f"_ivm_expected AS (SELECT {columns} FROM (\n{expected}\n) AS _ivm_model)\n"
        "SELECT 'missing' AS _ivm_side, * FROM (SELECT * FROM _ivm_expected"
        " EXCEPT ALL SELECT * FROM _ivm_actual) AS _ivm_m\n"
        "UNION ALL\n"
        "SELECT 'unexpected' AS _ivm_side, * FROM (SELECT * FROM _ivm_actual"
        " EXCEPT ALL SELECT * FROM _ivm_expected) AS _ivm_u"
    )


def compared(column: str, data_type: str, float_digits: int | None, dialect: str) -> str:
    """``column`` as compared: floating point to ``float_digits`` significant digits.

    DuckDB rounds (zero, NaN and infinities as themselves); Spark formats as text in
    scientific notation, which does the same without a logarithm of zero.
    """
    name = quote(column, dialect)
    if float_digits is None or data_type.upper() not in FLOAT_TYPES:
        return name
    if dialect == "spark":
        return f"format_string('%.{max(float_digits - 1, 0)}e', CAST({name} AS DOUBLE))"
    return (
        f"CASE WHEN {name} = 0 OR NOT isfinite({name}) THEN {name} ELSE round({name},"
        f" {float_digits} - CAST(ceil(log10(abs({name}))) AS INTEGER)) END"
    )
