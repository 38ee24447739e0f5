-- One row per order (the fact), LEFT JOINed to its customer (a dimension: an order whose
-- customer was deleted keeps its row) and to a per-order aggregate of its items.
with orders as (
    select * from {{ ref('stg_orders') }}
),

customers as (
    select * from {{ ref('stg_customers') }}
),

order_totals as (
    select order_id, count(*) as lines, sum(line_amount) as amount
    from {{ ref('stg_order_items') }}
    group by order_id
)

select
    orders.*,
    customers.name as customer_name,
    customers.country,
    order_totals.lines,
    order_totals.amount
from orders
left join customers on customers.customer_id = orders.customer_id
left join order_totals on order_totals.order_id = orders.order_id
