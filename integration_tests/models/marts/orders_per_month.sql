-- Every month of 2024 with its orders (none: 0): a month spine from dbt's date_spine with
-- constant bounds (SELECTs without FROM, numbered by a window: a constant relation that
-- never changes), LEFT JOINed to the orders, which do.
with months as (
    {{ dbt.date_spine("month", "cast('2024-01-01' as date)", "cast('2025-01-01' as date)") }}
)
select m.date_month, count(o.order_id) as orders
from months as m
left join {{ ref('stg_orders') }} as o on date_trunc('month', o.order_date) = m.date_month
group by m.date_month
