select
    p.product_id,
    p.product_name,
    p.category,
    count(*) as order_lines,
    sum(i.quantity) as units,
    sum(i.line_amount) as revenue
from {{ ref('stg_order_items') }} as i
join {{ ref('stg_products') }} as p on p.product_id = i.product_id
join {{ ref('stg_orders') }} as o on o.order_id = i.order_id
group by p.product_id, p.product_name, p.category
