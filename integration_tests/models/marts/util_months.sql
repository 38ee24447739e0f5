-- Every month from January 2018 up to today: dbt Labs' mrr-playbook's `util_months`, built
-- as the playbook builds it, by dbt-utils' date_spine up to current_date (vendored:
-- integration_tests/packages/dbt_utils). It reads no table: its only source is the clock.
-- A run pins the clock alone: on the same day it does nothing; on another day the months
-- that crossed today are its changes. (A new month also changes the compiled SQL, whose
-- number of intervals dbt-utils counts when the model compiles: that run rebuilds.)
{{ dbt_utils.date_spine(
    datepart="month",
    start_date="cast('2018-01-01' as date)",
    end_date="current_date"
) }}
