select customer_id, name, country
from {{ source('shop', 'customers') }}
