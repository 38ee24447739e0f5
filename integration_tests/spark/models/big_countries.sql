select country, revenue
from {{ ref('revenue_per_country') }}
where orders >= 3
