{#-
  duckstream_explain: how an incremental_ivm model is maintained, operator by operator (its
  delta rules, what a refresh recomputes, the sources and columns it reads, when it rebuilds),
  from the SQL the model was last built with; the adapter logs it at info level.
  Usage: dbt run-operation duckstream_explain --args '{model: orders_by_day}'
-#}
{% macro duckstream_explain(model) %}
  {%- if execute -%}
    {%- set found = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
        | selectattr('name', 'equalto', model) | list -%}
    {%- if not found -%}
      {{ exceptions.raise_compiler_error("duckstream_explain: no model named " ~ model) }}
    {%- endif -%}
    {%- set node = found[0] -%}
    {%- set relation = api.Relation.create(
        database=node.database, schema=node.schema, identifier=node.alias) -%}
    {%- do adapter.ivm_explain(relation) -%}
  {%- endif -%}
{% endmacro %}
