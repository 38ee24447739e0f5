{#-
  ivm_lag: a maintained table is no further behind its sources than allowed, as `dbt source
  freshness` checks a source: max_snapshots (snapshots committed to its sources since its
  last refresh) and max_seconds (since the oldest of them); neither given: any lag fails.
  Fails with one row (pending_snapshots, behind_seconds, problem), also when the table is not
  maintained by incremental_ivm. Warn instead of failing with config: {severity: warn}.
  Under --empty (no table has applied anything) it passes.
  Usage: data_tests: [{dbt_duckstream.ivm_lag: {arguments: {max_snapshots: 10, max_seconds: 3600}}}]
-#}
{% test ivm_lag(model, max_snapshots=none, max_seconds=none) %}
  {%- if execute and not flags.EMPTY -%}
    {{ adapter.ivm_lag_sql(model, max_snapshots, max_seconds) }}
  {%- else -%}
    select 1 as pending_snapshots where false
  {%- endif -%}
{% endtest %}
