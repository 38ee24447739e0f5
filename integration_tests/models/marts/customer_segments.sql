-- Reads another incremental_ivm model: its changes cascade within one dbt run.
with customers as (
    select
        case
            when revenue >= 1500 then 'gold'
            when revenue >= 600 then 'silver'
            else 'bronze'
        end as segment,
        region,
        revenue
    from {{ ref('revenue_per_customer') }}
)
select segment, region, count(*) as customers, sum(revenue) as revenue
from customers
group by segment, region
