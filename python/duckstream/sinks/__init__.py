"""Sinks: how the top operator's delta is applied to the materialized table."""
