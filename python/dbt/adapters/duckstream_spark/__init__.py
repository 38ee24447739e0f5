"""dbt adapter ``type: duckstream_spark``: dbt-spark plus incrementally maintained models.

Everything dbt-spark does keeps working (macros resolve ``duckstream_spark__`` -> ``spark__``
-> ``default__``; methods thrift, http, odbc and session come from dbt-spark). The
``incremental_ivm`` materialization and the ``ivm_equivalent`` test are the same macros as the
DuckDB adapter's (the repository's root dbt project ``dbt_duckstream``); they call adapter
methods that both adapters define under the same names.
"""

from dbt.adapters.base import AdapterPlugin

from dbt.adapters.duckstream_spark.connections import DuckstreamSparkConnectionManager
from dbt.adapters.duckstream_spark.credentials import DuckstreamSparkCredentials
from dbt.adapters.duckstream_spark.impl import DuckstreamSparkAdapter
from dbt.include import duckstream_spark

__all__ = [
    "DuckstreamSparkAdapter",
    "DuckstreamSparkConnectionManager",
    "DuckstreamSparkCredentials",
    "Plugin",
]

# As for the DuckDB adapter (see dbt.adapters.duckstream): the include project calls itself
# dbt_duckstream, and a project_name other than that makes dbt load it as an ordinary package,
# so `data_tests: [dbt_duckstream.ivm_equivalent]` resolves. dbt loads the include projects
# of the profile's adapter (and its dependencies) only, so with both plugins installed there
# is still one dbt_duckstream per run.
Plugin = AdapterPlugin(
    adapter=DuckstreamSparkAdapter,  # ty: ignore[invalid-argument-type]  (dbt-spark is untyped)
    credentials=DuckstreamSparkCredentials,
    include_path=duckstream_spark.PACKAGE_PATH,
    dependencies=["spark"],
    project_name="dbt_duckstream_spark_adapter",
)
