"""duckstream: incremental view maintenance for dbt on DuckDB + DuckLake and Spark + Iceberg.

>>> from duckstream import compile_ivm
>>> plan = compile_ivm("SELECT k, sum(v) AS total FROM t GROUP BY k", mv_name="totals")
>>> plan.query_mv
'SELECT k, total FROM dl.main.totals'
"""

from duckstream.compiler import compile_ivm
from duckstream.errors import DuckstreamError, UnsupportedSQLError, ViewSQLError
from duckstream.plan import IVMPlan, Naming

__all__ = [
    "DuckstreamError",
    "IVMPlan",
    "Naming",
    "UnsupportedSQLError",
    "ViewSQLError",
    "compile_ivm",
]
