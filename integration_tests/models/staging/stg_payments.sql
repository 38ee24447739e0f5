{{ config(materialized='ephemeral') }}
select payment_id, order_id, method, amount
from {{ source('shop', 'payments') }}
where amount > 0
