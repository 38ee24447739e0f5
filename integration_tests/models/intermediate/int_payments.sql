{{ config(unique_key='payment_id', incremental_strategy='delete+insert') }}
-- A classic dbt incremental model (new payments appended): a source for payments_by_method.
select payment_id, order_id, method, amount
from {{ ref('stg_payments') }}
{% if is_incremental() %}
where payment_id > (select coalesce(max(payment_id), 0) from {{ this }})
{% endif %}
