-- Every month from January 2024 up to today with its orders (none: 0): dbt Labs'
-- mrr-playbook's `util_months` spine, built by dbt-utils' date_spine as the playbook calls it
-- (integration_tests/packages/dbt_utils, vendored), LEFT JOINed to the orders. The spine
-- reads the clock (current_date) in a temporal filter: on another day, the months that
-- crossed today are changes of the join, maintained like the orders' own. (The spine
-- alone is models/marts/util_months, whose only source is the clock.)
with util_months as (
    {{ dbt_utils.date_spine(
        datepart="month",
        start_date="cast('2024-01-01' as date)",
        end_date="current_date"
    ) }}
)
select cast(m.date_month as date) as date_month, count(o.order_id) as orders
from util_months as m
left join {{ ref('stg_orders') }} as o
    on date_trunc('month', o.order_date) = cast(m.date_month as date)
group by cast(m.date_month as date)
