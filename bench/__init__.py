"""duckstream's benchmark: incremental refresh against recomputation on TPC-H in DuckLake.

``python -m bench`` (``make bench``) loads TPC-H once per scale factor into a DuckLake kept
under ``bench/.cache``, sets up one materialized view per supported TPC-H query, commits one
change batch per workload and measures, per query and in the same process: the refresh
(``strategy="auto"`` and forced ``incremental`` / ``full``), recomputation (``CREATE OR
REPLACE TABLE ... AS`` the query, into the same catalog) and the floor (reading the changed
rows of the touched tables from the change feed). Every refreshed table is compared with
recomputation. Results go to ``docs/benchmarks.md`` and charts to ``docs/``.
"""
