-- One row per order: orders, customers, order items and products joined.
select
    o.order_id,
    o.order_date,
    c.name as customer_name,
    c.country,
    count(*) as lines,
    count(distinct p.category) as categories,
    sum(i.line_amount) as total
from {{ ref('stg_orders') }} as o
join {{ ref('stg_customers') }} as c on c.customer_id = o.customer_id
join {{ ref('stg_order_items') }} as i on i.order_id = o.order_id
join {{ ref('stg_products') }} as p on p.product_id = i.product_id
group by o.order_id, o.order_date, c.name, c.country
