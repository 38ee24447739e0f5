"""dbt adapter ``type: duckstream``: dbt-duckdb plus incrementally maintained models.

Everything dbt-duckdb does keeps working (macros resolve ``duckstream__`` -> ``duckdb__`` ->
``default__``); the ``incremental_ivm`` materialization and the ``ivm_equivalent`` test come
from the include project ``dbt_duckstream`` (the repository's root dbt project).
"""

from dbt.adapters.duckstream.connections import DuckstreamConnectionManager
from dbt.adapters.duckstream.credentials import DuckstreamCredentials
from dbt.adapters.duckstream.impl import DuckstreamAdapter
from dbt.include import duckstream
from dbt_duckstream.adapter import plugin

__all__ = ["DuckstreamAdapter", "DuckstreamConnectionManager", "DuckstreamCredentials", "Plugin"]

Plugin = plugin(DuckstreamAdapter, DuckstreamCredentials, duckstream.PACKAGE_PATH, "duckdb")
