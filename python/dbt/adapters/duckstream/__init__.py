"""dbt adapter ``type: duckstream``: dbt-duckdb plus incrementally maintained models.

Everything dbt-duckdb does keeps working (macros resolve ``duckstream__`` -> ``duckdb__`` ->
``default__``); the ``incremental_ivm`` materialization and the ``ivm_equivalent`` test come
from the include project ``dbt_duckstream`` (the repository's root dbt project).
"""

from dbt.adapters.base import AdapterPlugin

from dbt.adapters.duckstream.connections import DuckstreamConnectionManager
from dbt.adapters.duckstream.credentials import DuckstreamCredentials
from dbt.adapters.duckstream.impl import DuckstreamAdapter
from dbt.include import duckstream

__all__ = ["DuckstreamAdapter", "DuckstreamConnectionManager", "DuckstreamCredentials", "Plugin"]

# The include project calls itself dbt_duckstream (its dbt_project.yml). dbt treats a project
# as an adapter's internal one when its name is the plugin's project_name, and does not let
# models address internal macros by package name; under another project_name it is loaded as
# an ordinary package, so `data_tests: [dbt_duckstream.ivm_equivalent]` resolves with the
# adapter alone and no packages.yml.
Plugin = AdapterPlugin(
    adapter=DuckstreamAdapter,  # ty: ignore[invalid-argument-type]  (dbt-duckdb is untyped)
    credentials=DuckstreamCredentials,
    include_path=duckstream.PACKAGE_PATH,
    dependencies=["duckdb"],
    project_name="dbt_duckstream_adapter",
)
