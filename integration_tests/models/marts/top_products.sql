-- The ten best-selling products by units: a top-k report. Units often tie at the tenth place;
-- SQL may return any of the tied products, duckstream keeps one valid choice (ties broken by
-- the output columns) and ivm_equivalent recomputes with the same tie-break.
select i.product_id, sum(i.quantity) as units
from {{ ref('stg_order_items') }} as i
group by i.product_id
order by units desc
limit 10
