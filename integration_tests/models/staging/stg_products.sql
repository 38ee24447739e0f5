select product_id, name as product_name, category
from {{ source('shop', 'products') }}
