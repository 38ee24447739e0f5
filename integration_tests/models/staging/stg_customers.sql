-- The usual dbt staging shape: the source as it is, then renamed / selected columns.
with source as (
    select * from {{ source('shop', 'customers') }}
),

renamed as (
    select customer_id, name, country from source
)

select * from renamed
