"""Test and benchmark support: DuckLake catalogs, TPC-H data and reproducible change workloads."""
