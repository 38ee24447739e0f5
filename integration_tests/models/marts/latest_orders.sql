-- Each customer's latest order: dbt's dedup idiom. duckstream maintains it by renumbering
-- only the customers whose orders changed (the window's partitions), not every customer.
select order_id, customer_id, order_date, status
from {{ ref('stg_orders') }}
qualify row_number() over (partition by customer_id order by order_date desc, order_id desc) = 1
