{#-
  duckstream_expire: expire the snapshots of the DuckLake catalogs the project's incremental_ivm
  models live in and read that no model needs (older than every model's cursors into them:
  `python -m duckstream expire`), logged at info level.
  Usage: dbt run-operation duckstream_expire [--args '{older_than: 7d, dry_run: true, cleanup: true}']
  older_than keeps that much time travel too; dry_run only says what; cleanup then deletes the
  files only expired snapshots used.
-#}
{% macro duckstream_expire(older_than=none, dry_run=false, cleanup=false) %}
  {%- if execute -%}
    {%- set relations = [] -%}
    {%- for node in graph.nodes.values() -%}
      {%- if node.resource_type == 'model' and node.config.materialized == 'incremental_ivm' -%}
        {%- do relations.append(api.Relation.create(
            database=node.database, schema=node.schema, identifier=node.alias)) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do adapter.ivm_expire(relations, older_than, dry_run, cleanup) -%}
  {%- endif -%}
{% endmacro %}
