"""The dbt side of duckstream, engine-independent: one core for both dbt adapters.

A model with ``materialized='incremental_ivm'`` goes through :func:`materialize`: the request
from the model (:class:`ModelRequest`, its configs checked by :mod:`.configs`), the build /
rebuild / maintain decision and its reason (:mod:`.decide`), the state record and the plan
hash (:mod:`.model`), the run's log line and the SQL it ran (:class:`Outcome`), and the
``ivm_equivalent`` test's query (:mod:`.equivalence`). What differs per engine sits behind
:class:`Backend`: ``dbt.adapters.duckstream.ivm`` (DuckDB + DuckLake) and
``dbt.adapters.duckstream_spark.ivm`` (Spark + Iceberg). :mod:`.adapter` holds the adapter
methods the macros call, mixed into both dbt adapters; it is the only module importing dbt.
"""

from dbt_duckstream.decide import Compiled, Decision, Found, decide
from dbt_duckstream.materialize import Backend, Refreshed, materialize
from dbt_duckstream.model import ModelError, ModelRequest, State, plan_hash
from dbt_duckstream.outcome import Outcome

__all__ = [
    "Backend",
    "Compiled",
    "Decision",
    "Found",
    "ModelError",
    "ModelRequest",
    "Outcome",
    "Refreshed",
    "State",
    "decide",
    "materialize",
    "plan_hash",
]
