{#-
  incremental_ivm: a table kept equal to the model's SELECT by applying the sources' DuckLake
  change feed (duckstream). The Python side (adapter.ivm_materialize) decides between
  building, rebuilding and maintaining, and runs its own transaction; this macro only
  orchestrates hooks, grants and docs around it, as dbt's table materialization does, and
  writes the SQL the run executed to target/run/<project>/<model path> (as statement('main')
  does; the adapter also logs it at debug level in logs/dbt.log).

  Configs: ivm_strategy ('auto' | 'incremental' | 'full': per run, estimate the change and
  rebuild when that is cheaper; always maintain; always rebuild), ivm_on_unsupported ('fail' |
  'full_refresh'), ivm_max_recursion_depth (default 1000: the steps a WITH RECURSIVE ...
  UNION ALL may take before the run fails naming it; a cycle never ends there),
  on_schema_change ('fail' stops when
  the model's columns change; otherwise the table is rebuilt), on_configuration_change
  ('apply' | 'continue' | 'fail': when the model's SQL or a view it reads changed, rebuild;
  keep maintaining the table as built; fail), contract (enforced: the query's columns and
  types are checked before the run, as dbt's table materialization does, and the table's
  visible columns after it), full_refresh, grants, persist_docs, pre_hook / post_hook.
  --empty builds a missing table from empty inputs (the next run builds it in full).

  One macro for both adapters (`duckstream` on DuckDB/DuckLake, `duckstream_spark` on
  Spark/Iceberg): it is registered for `default`, and each adapter implements the
  `ivm_*` methods it calls under the same names.
-#}
{% materialization incremental_ivm, default, supported_languages=['sql'] %}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set grant_config = config.get('grants') -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- set contract = config.get('contract') -%}
  {% if contract and contract.enforced %}
    {% do get_assert_columns_equivalent(compiled_code) %}
  {% endif %}

  {% if existing_relation is not none and not existing_relation.is_table %}
    {% do adapter.drop_relation(existing_relation) %}
  {% endif %}

  {% set outcome = adapter.ivm_materialize(
      target_relation,
      compiled_code,
      model,
      full_refresh=should_full_refresh(),
      on_unsupported=config.get('ivm_on_unsupported', 'fail'),
      on_schema_change=config.get('on_schema_change'),
      strategy=config.get('ivm_strategy', 'auto'),
      on_configuration_change=config.get('on_configuration_change'),
      empty=flags.EMPTY,
      max_recursion_depth=config.get('ivm_max_recursion_depth', 1000),
  ) %}
  {% if contract and contract.enforced %}
    {#- the table's visible columns and types, as models reading it see them -#}
    {%- set quoted = [] -%}
    {%- for column in adapter.get_columns_in_relation(target_relation) -%}
      {%- do quoted.append(adapter.quote(column.name)) -%}
    {%- endfor -%}
    {% do get_assert_columns_equivalent(
        'select ' ~ (quoted | join(', ')) ~ ' from ' ~ target_relation) %}
  {% endif %}
  {#- the SQL the run executed, where dbt writes a materialization's statement('main') -#}
  {% do write(outcome['sql']) %}
  {% do store_raw_result('main', message=outcome['message'], code='OK', rows_affected=outcome['rows']) %}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {% do apply_grants(target_relation, grant_config, should_revoke=not outcome['replaced']) %}
  {% if outcome['docs_differ'] %}
    {% do persist_docs(target_relation, model) %}
  {% endif %}
  {% do adapter.ivm_end_transaction() %}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
