"""Profile ``type: duckstream``: dbt-duckdb's credentials, plus the DuckLake extension.

A profile that attaches ``ducklake:<path>`` needs nothing else: the extension is loaded from
the installed ``duckdb-extension-ducklake`` package before the attachments are made.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.duckdb.credentials import DuckDBCredentials

from duckstream.engines.ducklake.extension import extension_path


def _names_ducklake(extension: object) -> bool:
    if isinstance(extension, dict):
        extension = extension.get("name", "")
    return isinstance(extension, str) and "ducklake" in extension.lower()


@dataclass
class DuckstreamCredentials(DuckDBCredentials):
    def __post_init__(self) -> None:
        super().__post_init__()
        extensions = list(self.extensions or [])
        if self._ducklake_dbs and not any(_names_ducklake(e) for e in extensions):
            self.extensions = [extension_path("ducklake"), *extensions]

    @property
    def type(self) -> str:
        return "duckstream"
