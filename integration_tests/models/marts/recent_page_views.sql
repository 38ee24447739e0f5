-- Page views of the last 7 days per customer: a temporal filter. Each refresh reads the
-- clock once and records it with the view's cursors; as days pass, the views that left the
-- window are deletions and those that entered it insertions, maintained incrementally.
select
    customer_id,
    count(*) as page_views,
    max(viewed_at) as last_viewed_at
from {{ source('shop', 'page_views') }}
where viewed_at >= current_date - interval 7 day
group by customer_id
