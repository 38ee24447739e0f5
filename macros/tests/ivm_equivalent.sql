{#-
  ivm_equivalent: the model's table holds exactly what a fresh run of the SQL it was built
  from returns (visible columns, as bags, NULLs equal; floating-point columns to float_digits
  significant digits, none for exact). Fails with one row per difference, its _ivm_side
  saying 'missing' (only in the recomputation) or 'unexpected' (only in the table).
  Usage: data_tests: [dbt_duckstream.ivm_equivalent]
-#}
{% test ivm_equivalent(model, float_digits=12) %}
  {%- if execute -%}
    {{ adapter.ivm_equivalence_sql(model, float_digits) }}
  {%- else -%}
    select 1 as _ivm_side where false
  {%- endif -%}
{% endtest %}
