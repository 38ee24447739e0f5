"""Compile a model once per version: its plan, kept under dbt's ``target/`` between runs.

Compiling a model costs 0.1-2 s (``make demo``'s marts), more than refreshing it. A run finds
the plan it would compile under ``target/duckstream/plans/``, one file per model, when nothing
it was compiled from changed: the backend's key (:meth:`~dbt_duckstream.materialize.Backend.
plan_key`: the model's compiled SQL, where its table goes, the definitions of the views it may
read, duckstream's code (:func:`code_version`)) names the file; what else the plan depends on
(:meth:`~dbt_duckstream.materialize.Backend.plan_depends`: the columns of the tables it reads)
is stored in it and read again from the catalog on every run. A file of another key is never
opened; storing a model's plan removes the model's files of other keys.

The file is a pickle, written and read by the same dbt project, like the rest of ``target/``.
Each temporary table's query is kept as the SQL it renders to (what the runner executes; a
tree takes tens of ms to load and ms more to render again), through :func:`rendered`.

>>> import tempfile
>>> from dbt_duckstream.decide import Compiled
>>> from dbt_duckstream.model import ModelRequest, State
>>> request = ModelRequest("totals", "lake", "main", "totals", "SELECT 1 AS x")
>>> plans = PlanCache(Path(tempfile.mkdtemp()))
>>> k1, k2 = key_of("one"), key_of("two")
>>> plans.load(request, k1) is None
True
>>> plans.store(request, CachedPlan(k1, ["x INTEGER"], "the plan", Compiled("h", ["x"], "")))
>>> plans.load(request, k1).plan, plans.load(request, k2)
('the plan', None)
>>> plans.store(request, CachedPlan(k2, [], "another", Compiled("h2", ["x"], "")))
>>> plans.load(request, k1), plans.load(request, k2).plan
(None, 'another')
"""

from __future__ import annotations

import copyreg
import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import os
import pickle
import re
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlglot import exp

from dbt_duckstream.decide import Compiled
from dbt_duckstream.model import ModelRequest, State
from duckstream.plan import CreateTemp

DIRECTORY = Path("duckstream") / "plans"  # under dbt's target path
STATES = Path("duckstream") / "states"  # the states tables were built with (StateCache)
# the packages whose code decides a plan, and those whose versions do (SQL rendering, names)
CODE = ("duckstream", "dbt_duckstream", "dbt.adapters.duckstream", "dbt.adapters.duckstream_spark")
VERSIONS = ("sqlglot", "duckdb")
KEY_LENGTH = 32  # hex characters of the key in a file's name
KEY_PATTERN = "[0-9a-f]" * KEY_LENGTH  # (not "*": model "x" must not match "x.y"'s files)


@dataclass
class CachedPlan:
    """A compiled plan, what it was compiled from (``key``) and what else it depends on
    (``depends``, compared with the catalog's at each run)."""

    key: str
    depends: Any
    plan: Any
    compiled: Compiled


class PlanCache:
    """The plans of a dbt project's models, one file each under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def under(cls, target_path: str | os.PathLike[str]) -> PlanCache:
        """The cache in dbt's target directory."""
        return cls(Path(target_path) / DIRECTORY)

    def load(self, request: ModelRequest, key: str) -> CachedPlan | None:
        """The model's plan compiled under ``key``; None when there is none (or it cannot
        be read: it is compiled again)."""
        try:
            with open(self._path(request, key), "rb") as file:
                found = pickle.load(file)
        except Exception:  # missing, or written by other code: compile instead
            return None
        if not isinstance(found, CachedPlan) or found.key != key:
            return None
        return found

    def store(self, request: ModelRequest, cached: CachedPlan) -> None:
        """Keep ``cached`` as the model's plan (its other plans removed). A cache that cannot
        be written costs the next run a compile, nothing else."""
        path = self._path(request, cached.key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            _Pickler(buffer, getattr(cached.plan, "dialect", None)).dump(cached)
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle, "wb") as file:
                file.write(buffer.getvalue())
            os.replace(temporary, path)
            for other in self.directory.glob(f"{_prefix(request)}.{KEY_PATTERN}.pickle"):
                if other != path:
                    other.unlink(missing_ok=True)
        except Exception:  # a plan that cannot be written (or pickled): compiled next run
            return

    def _path(self, request: ModelRequest, key: str) -> Path:
        return self.directory / f"{_prefix(request)}.{key[:KEY_LENGTH]}.pickle"


def _prefix(request: ModelRequest) -> str:
    """The model's file name stem: where its table goes, in file-name-safe characters."""
    name = f"{request.database}.{request.schema}.{request.identifier}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def key_of(*parts: Any) -> str:
    """A sha256 of ``parts`` (strings, numbers, lists and tuples of them)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@functools.cache
def code_version() -> str:
    """duckstream's code as it is installed (a sha256 of its modules' source and the versions
    of the libraries that render its SQL): a plan compiled by other code is compiled again,
    even under the same version number (a development install)."""
    digest = hashlib.sha256()
    for package in CODE:
        for directory in _directories(package):
            for path in sorted(directory.rglob("*.py")):
                digest.update(str(path.relative_to(directory)).encode())
                digest.update(path.read_bytes())
    for name in VERSIONS:
        digest.update(f"{name} {metadata.version(name)}".encode())
    return digest.hexdigest()


def _directories(package: str) -> list[Path]:
    """Where ``package``'s modules are, found without importing it (the Spark adapter's
    import starts pyspark)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    return sorted({Path(p) for p in (spec.submodule_search_locations or [])} if spec else [])


def rendered(sql: str) -> exp.Expr:
    """A leaf expression that renders as ``sql`` in any dialect: a cached temporary table's
    query, as the SQL the plan's engine rendered it to.

    >>> rendered("SELECT 'a b' AS \\"x\\"").sql(dialect="duckdb")
    'SELECT \\'a b\\' AS "x"'
    """
    return exp.Var(this=sql)


def _create_temp(kind: type[CreateTemp], values: dict[str, Any]) -> CreateTemp:
    return kind(**values)


def _reduce(step: CreateTemp, dialect: str) -> tuple[Any, tuple[Any, ...]]:
    """``step`` with its queries (every expression but the table's name) as ``dialect``
    SQL leaves: whatever queries a step holds (the runner picks among them per window)."""
    values = {}
    for found in dataclasses.fields(step):
        value = getattr(step, found.name)
        if isinstance(value, exp.Expr) and not isinstance(value, exp.Table):
            value = rendered(value.sql(dialect=dialect))
        values[found.name] = value
    return _create_temp, (type(step), values)


class _Pickler(pickle.Pickler):
    """Pickles a plan's :class:`CreateTemp` steps with their queries rendered in the plan's
    ``dialect`` (as they are, without one)."""

    def __init__(self, file: io.BytesIO, dialect: str | None) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = copyreg.dispatch_table.copy()
        if dialect is not None:
            self.dispatch_table[CreateTemp] = lambda step: _reduce(step, dialect)


class StateCache:
    """The states tables were built with (:class:`~dbt_duckstream.model.State`), kept under
    dbt's ``target/`` by the version of the record they were read from: an engine whose
    state record gets a new identity with every write (DuckLake: the state table is replaced
    at each build, a new table uuid, unique across lakes) reads the identity (a catalog
    lookup, ~1 ms) instead of the record (~9 ms CPU on DuckLake after a commit). One JSON
    file per model; storing one removes the model's others.

    >>> import tempfile
    >>> from dbt_duckstream.model import State
    >>> request = ModelRequest("totals", "lake", "main", "totals", "SELECT 1 AS x")
    >>> states = StateCache(Path(tempfile.mkdtemp()))
    >>> state = State("ivm", "h", "SELECT 1 AS x", "SELECT 1 AS x", ["x"], "1.0")
    >>> states.load(request, "u1") is None
    True
    >>> states.store(request, "u1", state)
    >>> states.load(request, "u1") == state, states.load(request, "u2")
    (True, None)
    >>> states.store(request, "u2", state)
    >>> states.load(request, "u1"), states.load(request, "u2") == state
    (None, True)
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def under(cls, target_path: str | os.PathLike[str]) -> StateCache:
        """The cache in dbt's target directory."""
        return cls(Path(target_path) / STATES)

    def load(self, request: ModelRequest, version: str) -> State | None:
        """The model's state read from the record of ``version``; None when not kept."""
        try:
            with open(self._path(request, version), encoding="utf-8") as file:
                found = json.load(file)
        except Exception:  # missing, or unreadable: the record is read instead
            return None
        return State.from_record(found) if isinstance(found, dict) else None

    def store(self, request: ModelRequest, version: str, state: State) -> None:
        """Keep ``state`` as read from the record of ``version`` (the model's others
        removed); a cache that cannot be written costs the next run a read."""
        path = self._path(request, version)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(state.record(), file)
            os.replace(temporary, path)
            for other in self.directory.glob(f"{_prefix(request)}.*.json"):
                if other != path and other.name.count(".") == path.name.count("."):
                    other.unlink(missing_ok=True)
        except Exception:
            return

    def _path(self, request: ModelRequest, version: str) -> Path:
        return self.directory / f"{_prefix(request)}.{re.sub(r'[^A-Za-z0-9_-]', '_', version)}.json"
