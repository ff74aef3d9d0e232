"""The modules of nmt import each other without a cycle, counting imports inside functions too."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the file at ``path`` imports, at module level or in a function.

    ``from nmt import x`` counts as an import of ``nmt.x`` when that is a module, else of ``nmt``.
    """
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: relative import; the package uses absolute imports")
    return found & modules


def import_graph() -> dict[str, set[str]]:
    """Module name -> the package's modules it imports (``nmt`` itself is ``nmt/__init__.py``)."""
    files = {("nmt" if p.stem == "__init__" else f"nmt.{p.stem}"): p for p in PACKAGE.glob("*.py")}
    return {name: imported_modules(path, set(files)) - {name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle ``[a, b, ..., a]`` of ``graph``, or None (depth-first search with three colours)."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "nmt.training" in graph["nmt.__main__"]  # imported inside a function of the CLI
    assert "nmt" in graph["nmt.download"]  # from nmt import __version__


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
