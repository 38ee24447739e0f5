"""How the code is laid out: no import cycle in ``python/duckstream``, and the engines kept
apart (nothing on the Spark + Iceberg side imports DuckLake modules; the operator tree, the
sinks and the normalizer see an engine only through ``engines.base``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "python" / "duckstream"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The duckstream modules ``path`` imports (anywhere, ``if TYPE_CHECKING:`` excluded)."""
    found: set[str] = set()
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m in modules}


def _graph() -> dict[str, set[str]]:
    paths = {_module(p): p for p in ROOT.rglob("*.py")}
    graph = {m: _imports(p, set(paths)) for m, p in paths.items()}
    # importing a.b.c runs a and a.b first: a module depends on its packages' __init__ too
    for deps in graph.values():
        for dep in list(deps):
            parts = dep.split(".")
            deps.update(
                ".".join(parts[:i]) for i in range(2, len(parts)) if ".".join(parts[:i]) in paths
            )
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(graph[module]):
            if dep == module or (module.startswith(dep + ".") and dep in graph):
                continue  # a module's own package: Python resolves that order itself
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_import_cycle() -> None:
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_iceberg_imports_nothing_from_ducklake() -> None:
    graph = _graph()
    spark_side = [
        m for m in graph if m.startswith(("duckstream.engines.iceberg", "duckstream.spark"))
    ]
    assert spark_side
    for module in spark_side:
        bad = {d for d in graph[module] if "ducklake" in d}
        assert not bad, f"{module} imports {bad}"


def test_operators_see_engines_only_through_their_interface() -> None:
    paths = {_module(p): p for p in ROOT.rglob("*.py")}
    engine_free = ("duckstream.tree", "duckstream.sinks", "duckstream.normalize")
    for module, path in paths.items():
        if not module.startswith(engine_free):
            continue
        direct = _imports(path, set(paths))
        bad = {d for d in direct if d.startswith("duckstream.engines.")}
        bad -= {"duckstream.engines.base"}
        assert not bad, f"{module} imports {bad}"


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_layers_import_downward_only() -> None:
    """The compiler's layers, top down: ``normalize`` (view SQL -> normal form), then ``tree``
    (operators and their delta rules), then the engines; ``expressions`` and ``clock`` are the
    shared vocabulary under all of them. A layer imports only the layers below it."""
    graph = _graph()
    below = {
        "duckstream.normalize": ("duckstream.tree", "duckstream.engines", "duckstream.sinks"),
        "duckstream.tree": ("duckstream.normalize", "duckstream.sinks", "duckstream.compiler"),
        "duckstream.expressions": ("duckstream.normalize", "duckstream.tree", "duckstream.engines"),
        "duckstream.clock": ("duckstream.normalize", "duckstream.tree", "duckstream.engines"),
    }
    for module, deps in graph.items():
        for layer, forbidden in below.items():
            if module == layer or module.startswith(layer + "."):
                bad = {d for d in deps if d.startswith(forbidden)}
                assert not bad, f"{module} imports {sorted(bad)} (a layer above it)"


def _imported_roots(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (anywhere in the file)."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_shipped_code_does_not_import_hypothesis() -> None:
    """Hypothesis (a dev dependency) is for the tests alone: its generators live in
    ``tests/strategies.py``, and nothing the package ships, nor the benchmarks, imports it."""
    shipped = [ROOT, ROOT.parent.parent / "bench", ROOT.parent.parent / "dbt_duckstream"]
    paths = [p for directory in shipped for p in directory.rglob("*.py")]
    assert len(paths) > 50
    bad = sorted(str(p) for p in paths if "hypothesis" in _imported_roots(p))
    assert not bad, f"these import hypothesis: {bad}"
