-- One row per customer with their orders' summary: a LEFT JOIN to a per-key aggregate CTE
-- (customers without orders are kept, NULL-extended) and to the regions seed (a dimension).
with customers as (
    select * from {{ ref('stg_customers') }}
),

orders as (
    select * from {{ ref('stg_orders') }}
),

customer_orders_summary as (
    select
        customer_id,
        count(*) as order_count,
        min(order_date) as first_order,
        max(order_date) as last_order
    from orders
    group by customer_id
)

select
    customers.*,
    regions.region,
    coalesce(summary.order_count, 0) as order_count,
    summary.first_order,
    summary.last_order
from customers
left join {{ ref('country_regions') }} as regions on regions.country = customers.country
left join customer_orders_summary as summary on summary.customer_id = customers.customer_id
