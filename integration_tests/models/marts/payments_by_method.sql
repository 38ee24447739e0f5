select p.method, count(*) as payments, sum(p.amount) as amount, max(p.amount) as largest
from {{ ref('int_payments') }} as p
join {{ ref('stg_orders') }} as o on o.order_id = p.order_id
group by p.method
having count(*) > 10
