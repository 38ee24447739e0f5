select distinct c.country, r.region
from {{ ref('stg_customers') }} as c
join {{ ref('country_regions') }} as r on r.country = c.country
join {{ ref('stg_orders') }} as o on o.customer_id = c.customer_id
