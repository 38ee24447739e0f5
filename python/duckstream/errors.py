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


class RebuildRequired(DuckstreamError):
    """The view cannot be refreshed incrementally (no cursors, a cursor snapshot expired, a
    source altered or recreated...): rebuild it (``initialize_cursors``). The message starts
    with ``duckstream: rebuild required: ``, the reason follows."""

    PREFIX = "duckstream: rebuild required: "

    def __init__(self, reason: str) -> None:
        self.reason = reason.removeprefix(self.PREFIX)
        super().__init__(self.PREFIX + self.reason)


class RefreshConflict(DuckstreamError):
    """A refresh (or rebuild) of a view could not commit: another commit to the view came
    first since it began, as another process's refresh of the same view does. Nothing of it
    was applied; the next refresh catches up from the cursors that other commit recorded.
    ``view`` names the view; ``engine`` (``DuckLake``, ``Iceberg``) said ``error``."""

    def __init__(self, view: str, error: Exception | str, engine: str = "DuckLake") -> None:
        self.view = view
        super().__init__(
            f"duckstream: the refresh of {view} conflicted with another commit to it (another"
            " refresh of the same view committed first) and was rolled back: nothing of it was"
            f" applied, the next refresh catches up. {engine} said: {error}"
        )
