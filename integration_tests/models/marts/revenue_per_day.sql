select
    o.order_date,
    count(distinct o.order_id) as orders,
    count(*) as order_lines,
    sum(i.quantity) as units,
    sum(i.line_amount) as revenue
from {{ ref('stg_orders') }} as o
join {{ ref('stg_order_items') }} as i on i.order_id = o.order_id
group by o.order_date
