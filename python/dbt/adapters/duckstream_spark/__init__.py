"""dbt adapter ``type: duckstream_spark``: dbt-spark plus incrementally maintained models.

Everything dbt-spark does keeps working (macros resolve ``duckstream_spark__`` -> ``spark__``
-> ``default__``; methods thrift, http, odbc and session come from dbt-spark). The
``incremental_ivm`` materialization and the ``ivm_equivalent`` test are the same macros as the
DuckDB adapter's (the repository's root dbt project ``dbt_duckstream``); they call adapter
methods that both adapters define under the same names.
"""

from dbt.adapters.duckstream_spark.connections import DuckstreamSparkConnectionManager
from dbt.adapters.duckstream_spark.credentials import DuckstreamSparkCredentials
from dbt.adapters.duckstream_spark.impl import DuckstreamSparkAdapter
from dbt.include import duckstream_spark
from dbt_duckstream.adapter import plugin

__all__ = [
    "DuckstreamSparkAdapter",
    "DuckstreamSparkConnectionManager",
    "DuckstreamSparkCredentials",
    "Plugin",
]

Plugin = plugin(
    DuckstreamSparkAdapter, DuckstreamSparkCredentials, duckstream_spark.PACKAGE_PATH, "spark"
)
