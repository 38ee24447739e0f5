{#-
  duckstream_status: the project's incremental_ivm models as `python -m duckstream status`
  shows them (cursors, snapshots behind and since when, recent refreshes: path, why, rows,
  time), logged at info level.
  Usage: dbt run-operation duckstream_status [--args '{model: orders_by_day}']
-#}
{% macro duckstream_status(model=none) %}
  {%- if execute -%}
    {%- set relations = [] -%}
    {%- for node in graph.nodes.values() -%}
      {%- if node.resource_type == 'model' and node.config.materialized == 'incremental_ivm'
          and (model is none or node.name == model) -%}
        {%- do relations.append(api.Relation.create(
            database=node.database, schema=node.schema, identifier=node.alias)) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if model is not none and not relations -%}
      {{ exceptions.raise_compiler_error("duckstream_status: no incremental_ivm model named " ~ model) }}
    {%- endif -%}
    {%- do adapter.ivm_status(relations) -%}
  {%- endif -%}
{% endmacro %}
