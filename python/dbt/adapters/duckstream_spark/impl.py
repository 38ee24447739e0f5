"""The ``duckstream_spark`` adapter: dbt-spark's, plus what ``incremental_ivm`` calls from Jinja.

The methods the macros call have the same names and arguments as the DuckDB adapter's
(:class:`dbt.adapters.duckstream.impl.DuckstreamAdapter`), so one materialization and one test
serve both adapters (:class:`dbt_duckstream.adapter.IVMAdapter` holds them). The work happens
in Python, the engine-independent core (:mod:`dbt_duckstream`) over the Iceberg backend
(:mod:`dbt.adapters.duckstream_spark.ivm`), on the SparkSession of dbt-spark's ``session``
method, which is the process's one session (``SparkSession.builder.getOrCreate()`` with the
profile's ``server_side_parameters``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbt.adapters.base.meta import available
from dbt.adapters.base.relation import AdapterTrackingRelationInfo
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark.connections import SparkConnectionMethod
from dbt.adapters.spark.impl import SparkAdapter
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters import __about__ as about
from dbt.adapters.duckstream_spark.__version__ import version as VERSION
from dbt.adapters.duckstream_spark.connections import DuckstreamSparkConnectionManager
from dbt.adapters.duckstream_spark.ivm import IcebergBackend, current_catalog, equivalence_sql
from dbt_duckstream import hidden
from dbt_duckstream.adapter import IVMAdapter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DuckstreamSparkAdapter(IVMAdapter, SparkAdapter):
    # dbt-spark declares it a TypeAlias of its own class; a subclass is what dbt expects here.
    ConnectionManager = DuckstreamSparkConnectionManager  # ty: ignore[invalid-assignment]
    ivm_logger = AdapterLogger("duckstream_spark")

    def _ivm_backend(self) -> IcebergBackend:
        return IcebergBackend(self._ivm_session())

    def _ivm_equivalence_sql(self, relation: Any, float_digits: int | None) -> str:
        return equivalence_sql(
            self._ivm_session(), relation.schema, relation.identifier, float_digits
        )

    def parse_describe_extended(self, relation: Any, raw_rows: Any) -> list[Any]:
        """dbt-spark's columns of ``DESCRIBE TABLE EXTENDED`` (``get_columns_in_relation``),
        without duckstream's hidden ``_ivm_*`` columns when its table properties say
        duckstream maintains the table (:mod:`dbt_duckstream.hidden`)."""
        columns = super().parse_describe_extended(relation, raw_rows)
        return hidden.visible(columns, lambda: hidden.spark_maintained(_properties(raw_rows)))

    def parse_columns_from_information(self, relation: Any) -> list[Any]:
        """The columns ``dbt docs`` reads from a relation's listed information, as filtered
        as :meth:`parse_describe_extended`'s."""
        columns = super().parse_columns_from_information(relation)
        information = getattr(relation, "information", None) or ""
        return hidden.visible(columns, lambda: hidden.spark_maintained(information))

    def _ivm_expire(
        self, views: list[Any], older_than: str | None, dry_run: bool, cleanup: bool
    ) -> list[str]:
        """:func:`duckstream.engines.iceberg.expire.expire` of the namespaces the views live
        in (and the tables they read), in the session's current catalog; Iceberg deletes the
        files only expired snapshots used (``cleanup`` is always on)."""
        from duckstream.engines.iceberg.expire import expire
        from duckstream.status import older_than as bound_of

        older = bound_of(older_than)
        spark = self._ivm_session()
        catalog = current_catalog(spark)
        namespaces = sorted({s.view.split(".")[1] for s in views})
        done = expire(spark, catalog, namespaces, older, dry_run=dry_run)
        return [e.text(dry_run) for e in done]

    def _ivm_status(self, relation: Any) -> Any:
        """From the table's Iceberg snapshots (:mod:`duckstream.engines.iceberg.status`), in
        the session's current catalog (dbt-spark's relations name none: their ``database``
        repeats the schema)."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import AnalysisException

        from duckstream.engines.iceberg.status import view_status

        spark = self._ivm_session()
        view = f"{current_catalog(spark)}.{relation.schema}.{relation.identifier}"
        try:
            return view_status(spark, view)
        except (AnalysisException, Py4JJavaError):  # no such Iceberg table: not maintained
            return None

    @available
    def ivm_docs_differ(self, relation: Any, model: Any) -> bool:
        """Never: on Iceberg a column comment is a schema change, which would make every model
        reading this table rebuild; docs are persisted when the table is (re)built only."""
        return False

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> AdapterTrackingRelationInfo:
        """dbt's default derives the module from the class name (``duckstreamspark``)."""
        return AdapterTrackingRelationInfo(
            adapter_name="duckstream_spark",
            base_adapter_version=about.version,
            adapter_version=VERSION,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    def _ivm_session(self) -> SparkSession:
        """The SparkSession dbt-spark's ``session`` method runs its statements on."""
        credentials = self.config.credentials
        if credentials.method != SparkConnectionMethod.SESSION:
            raise DbtRuntimeError(
                "incremental_ivm on duckstream_spark runs duckstream's Spark runner in this"
                f" process and needs `method: session` (the profile has {credentials.method})."
            )
        from pyspark.sql import SparkSession

        self.connections.get_thread_connection()  # dbt opened it; fail like dbt if not
        builder = SparkSession.builder.enableHiveSupport()
        for key, value in credentials.server_side_parameters.items():
            builder = builder.config(key, value)
        return builder.getOrCreate()


def _properties(raw_rows: Any) -> str:
    """The ``Table Properties`` value of ``DESCRIBE TABLE EXTENDED`` rows (``""`` if none)."""
    for row in raw_rows:
        if row["col_name"] == "Table Properties":
            return str(row["data_type"] or "")
    return ""
