"""The ``duckstream_spark`` adapter: dbt-spark's, plus what ``incremental_ivm`` calls from Jinja.

The methods the macros call have the same names and arguments as the DuckDB adapter's
(:class:`dbt.adapters.duckstream.impl.DuckstreamAdapter`), so one materialization and one test
serve both adapters. The work happens in Python (:mod:`dbt.adapters.duckstream_spark.ivm`) on
the SparkSession of dbt-spark's ``session`` method, which is the process's one session
(``SparkSession.builder.getOrCreate()`` with the profile's ``server_side_parameters``).
"""

from __future__ import annotations

from collections.abc import Mapping
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
from dbt.adapters.duckstream_spark.ivm import (
    ModelError,
    ModelRequest,
    Outcome,
    equivalence_sql,
    materialize,
)
from duckstream.errors import DuckstreamError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = AdapterLogger("duckstream_spark")


class DuckstreamSparkAdapter(SparkAdapter):
    # dbt-spark declares it a TypeAlias of its own class; a subclass is what dbt expects here.
    ConnectionManager = DuckstreamSparkConnectionManager  # ty: ignore[invalid-assignment]

    @available
    def ivm_materialize(
        self,
        relation: Any,
        compiled_code: str,
        model: Any,
        full_refresh: bool = False,
        on_unsupported: str | None = None,
        on_schema_change: str | None = None,
        strategy: str | None = None,
    ) -> dict[str, Any]:
        """Build, rebuild or maintain ``relation`` from the model's SQL.

        Returns ``message`` (for the run result), ``rows`` and ``replaced`` (the table is
        new, so grants and docs must be applied again).
        """
        request = ModelRequest(
            name=str(_get(model, "name")),
            schema=relation.schema,
            identifier=relation.identifier,
            sql=compiled_code.strip().rstrip(";").strip(),
            path=str(_get(model, "original_file_path") or ""),
            full_refresh=bool(full_refresh),
            on_unsupported=on_unsupported or "fail",
            on_schema_change=on_schema_change or "sync_all_columns",
            strategy=strategy or "auto",
        )
        try:
            outcome = materialize(self._ivm_session(), request)
        except (ModelError, DuckstreamError) as error:
            raise DbtRuntimeError(str(error)) from None
        self._report(relation, outcome)
        return {"message": outcome.message(), "rows": outcome.rows, "replaced": outcome.replaced}

    @available
    def ivm_end_transaction(self) -> None:
        """Spark has no transactions; close dbt's bookkeeping one if it opened one."""
        connection = self.connections.get_thread_connection()
        if connection.transaction_open:
            self.connections.commit()

    @available.parse_none
    def ivm_equivalence_sql(self, relation: Any, float_digits: int | None = 12) -> str:
        """The ``ivm_equivalent`` test's query for ``relation`` (see ``ivm.equivalence_sql``)."""
        return equivalence_sql(
            self._ivm_session(), relation.schema, relation.identifier, float_digits
        )

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

    def _report(self, relation: Any, outcome: Outcome) -> None:
        logger.info(f"{relation.render()} {outcome.message()}")
        for warning in outcome.warnings:
            logger.warning(warning)


def _get(thing: Any, key: str) -> Any:
    if isinstance(thing, Mapping):
        return thing.get(key)
    return getattr(thing, key, None)
