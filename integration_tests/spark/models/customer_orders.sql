-- Every customer with their orders' count and total: a LEFT JOIN to a per-key aggregate CTE
-- (a customer without orders keeps its row, with 0 orders and a NULL total); `c.*` expands
-- from the source's columns, which the adapter reads from the Iceberg catalog.
with customer_orders_summary as (
    select customer_id, count(*) as orders, sum(amount) as total
    from {{ source('raw', 'orders') }}
    group by customer_id
)

select c.*, coalesce(s.orders, 0) as orders, s.total
from {{ source('raw', 'customers') }} as c
left join customer_orders_summary as s on s.customer_id = c.customer_id
