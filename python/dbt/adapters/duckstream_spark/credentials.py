"""Profile ``type: duckstream_spark``: dbt-spark's credentials, plus a local Iceberg runtime.

With ``method: session`` dbt-spark builds its SparkSession from ``server_side_parameters``
(each one a builder ``.config``). A profile that configures an Iceberg catalog there but no
``spark.jars`` / ``spark.jars.packages`` gets the Iceberg runtime jars duckstream uses for its
local sessions (``DUCKSTREAM_ICEBERG_JARS``, else the ``snowpark-connect-deps-iceberg``
package; see :mod:`duckstream.engines.iceberg.session`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dbt.adapters.spark.connections import SparkConnectionMethod, SparkCredentials

ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
JAR_KEYS = ("spark.jars", "spark.jars.packages")


def local_iceberg_jars() -> str:
    """The comma-separated Iceberg runtime jars of a local duckstream Spark session."""
    from duckstream.engines.iceberg.session import JARS_ENV, bundled_iceberg_jars

    return os.environ.get(JARS_ENV) or ",".join(bundled_iceberg_jars())


def wants_local_iceberg(method: object, parameters: dict[str, str]) -> bool:
    """A session-method profile with an Iceberg catalog and no jars of its own."""
    return (
        method == SparkConnectionMethod.SESSION
        and ICEBERG_CATALOG in parameters.values()
        and not any(parameters.get(key) for key in JAR_KEYS)
    )


@dataclass
class DuckstreamSparkCredentials(SparkCredentials):
    def __post_init__(self) -> None:
        super().__post_init__()
        if wants_local_iceberg(self.method, self.server_side_parameters):
            self.server_side_parameters["spark.jars"] = local_iceberg_jars()

    @property
    def type(self) -> str:
        return "duckstream_spark"
