select
    c.customer_id,
    c.name,
    r.region,
    count(distinct o.order_id) as orders,
    sum(i.line_amount) as revenue,
    avg(i.line_amount) as avg_line_amount,
    min(o.order_date) as first_order,
    max(o.order_date) as last_order
from {{ ref('stg_customers') }} as c
join {{ ref('country_regions') }} as r on r.country = c.country
join {{ ref('stg_orders') }} as o on o.customer_id = c.customer_id
join {{ ref('stg_order_items') }} as i on i.order_id = o.order_id
group by c.customer_id, c.name, r.region
