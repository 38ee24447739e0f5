"""Profile ``type: duckstream``: dbt-duckdb's credentials, plus the DuckLake extension.

A profile that attaches ``ducklake:<path>`` needs nothing else: the extension is loaded from
the installed ``duckdb-extension-ducklake`` package before the attachments are made; one that
attaches ``ducklake:postgres:<libpq string>`` (a DuckLake whose catalog is in PostgreSQL, for
writers in other processes) also gets the postgres extension, from
``duckdb-extension-postgres``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbt.adapters.duckdb.credentials import DuckDBCredentials

from duckstream.engines.ducklake.extension import extension_path, loadable_path


def _names(extension: object, name: str) -> bool:
    if isinstance(extension, dict):
        extension = extension.get("name", "")
    return isinstance(extension, str) and name in extension.lower()


def _attach_paths(credentials: DuckDBCredentials) -> list[str]:
    paths = [credentials.path or ""]
    for attachment in credentials.attach or []:
        path = attachment.get("path") if isinstance(attachment, dict) else attachment.path
        paths.append(path if isinstance(path, str) else "")
    return [p.lower() for p in paths]


@dataclass
class DuckstreamCredentials(DuckDBCredentials):
    def __post_init__(self) -> None:
        super().__post_init__()
        extensions = list(self.extensions or [])
        if self._ducklake_dbs and not any(_names(e, "ducklake") for e in extensions):
            extensions = [extension_path("ducklake"), *extensions]
        postgres = any(p.startswith("ducklake:postgres:") for p in _attach_paths(self))
        if postgres and not any(_names(e, "postgres") for e in extensions):
            extensions = [loadable_path("postgres"), *extensions]
        self.extensions = extensions or self.extensions

    @property
    def type(self) -> str:
        return "duckstream"
