"""Errors the compiler raises: what it cannot maintain, and view SQL it cannot read."""

from __future__ import annotations


class DuckstreamError(Exception):
    """Base class of every error duckstream raises on purpose."""


class UnsupportedSQLError(DuckstreamError):
    """The view uses a construct the compiler cannot maintain incrementally.

    ``feature`` names the construct (``"window_function"``, ``"limit"``, ...) so callers can
    react to it (dbt falls back to recomputation when the user asked for that); ``message``
    says what was found, and where.
    """

    def __init__(self, feature: str, message: str) -> None:
        self.feature = feature
        self.message = message
        super().__init__(f"{feature}: {message}")


class ViewSQLError(DuckstreamError):
    """The view SQL cannot be parsed or is not a single SELECT."""
