select
    c.country,
    count(*) as orders,
    sum(o.amount) as revenue
from {{ source('raw', 'orders') }} as o
join {{ source('raw', 'customers') }} as c on o.customer_id = c.customer_id
group by c.country
