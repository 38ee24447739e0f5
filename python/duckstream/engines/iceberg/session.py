"""A local Spark session with an Apache Iceberg catalog, runnable offline.

The Iceberg runtime comes from one of, in this order: ``spark.jars.packages`` or ``spark.jars``
in ``extra_conf`` (real deployments), the comma-separated jar paths in the environment variable
``DUCKSTREAM_ICEBERG_JARS``, or the PyPI package ``snowpark-connect-deps-iceberg`` plus a
Jackson jar relocated from pyspark's own (see :mod:`duckstream.shaded_jackson`).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from duckstream.shaded_jackson import cached_file, relocated_jackson_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CATALOG = "lake"
ICEBERG_RUNTIME = "iceberg-spark-runtime-3.5_2.12-*.jar"
JARS_ENV = "DUCKSTREAM_ICEBERG_JARS"
LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
"""


def bundled_iceberg_jars() -> list[str]:
    """The Iceberg runtime jar from ``snowpark-connect-deps-iceberg`` and relocated Jackson."""
    import pyspark
    import snowpark_connect_deps_iceberg

    runtimes = sorted(snowpark_connect_deps_iceberg.get_jars_dir().glob(ICEBERG_RUNTIME))
    if not runtimes:
        raise FileNotFoundError(f"no {ICEBERG_RUNTIME} in snowpark-connect-deps-iceberg")
    jackson = relocated_jackson_jar(Path(pyspark.__file__).parent / "jars")
    return [str(runtimes[-1]), str(jackson)]


def _log4j2_file() -> Path:
    """A log4j2 configuration that logs errors only (Spark's default logs warnings)."""
    name = f"log4j2-{hashlib.sha256(LOG4J2.encode()).hexdigest()[:12]}.properties"
    return cached_file(name, lambda path: path.write_text(LOG4J2))


def session_conf(
    warehouse: str, *, cores: int | None = None, extra_conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The Spark configuration :func:`local_session` uses."""
    extra = dict(extra_conf or {})
    conf = {
        "spark.master": f"local[{cores or '*'}]",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        f"spark.sql.catalog.{CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{CATALOG}.type": "hadoop",
        f"spark.sql.catalog.{CATALOG}.warehouse": str(Path(warehouse).resolve()),
        "spark.sql.defaultCatalog": CATALOG,
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.pyspark.python": sys.executable,
        "spark.driver.defaultJavaOptions": f"-Dlog4j2.configurationFile={_log4j2_file()}",
    }
    if "spark.jars.packages" not in extra and "spark.jars" not in extra:
        jars = os.environ.get(JARS_ENV)
        conf["spark.jars"] = jars if jars else ",".join(bundled_iceberg_jars())
    return conf | extra


def local_session(
    warehouse: str,
    *,
    app_name: str = "duckstream",
    cores: int | None = None,
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or return the running) local Spark session with Iceberg catalog ``lake``.

    Two-part names (``db.t``) resolve in ``lake``, a Hadoop catalog rooted at ``warehouse``.
    Spark allows one JVM per Python process: if a session is already running, its static
    settings (jars, extensions, catalogs) stay as they were.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in session_conf(warehouse, cores=cores, extra_conf=extra_conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _Statement:
    """A ``java.util.concurrent.Callable`` (through py4j) that runs one SQL statement."""

    def __init__(self, spark: SparkSession, sql: str) -> None:
        self.spark, self.sql = spark, sql

    def call(self) -> None:
        self.spark.sql(self.sql)

    class Java:
        implements = ["java.util.concurrent.Callable"]


def sql_with_commit_properties(
    spark: SparkSession, sql: str, properties: Mapping[str, str]
) -> None:
    """Run ``sql`` so that the Iceberg snapshot it commits carries ``properties`` in its summary.

    Spark SQL has no syntax for this; Iceberg's ``CommitMetadata.withCommitProperties`` sets
    them in a JVM thread-local around a callable. pyspark's default pinned-thread py4j gateway
    runs the Python callback's own JVM calls on that same thread, so the statement sees them.
    """
    from py4j.clientserver import ClientServer

    context = spark.sparkContext
    if not isinstance(context._gateway, ClientServer):
        raise RuntimeError("needs pyspark's pinned-thread mode (PYSPARK_PIN_THREAD unset/true)")
    jvm = context._jvm
    assert jvm is not None
    jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
        dict(properties), _Statement(spark, sql), jvm.java.lang.RuntimeException._java_lang_class
    )
