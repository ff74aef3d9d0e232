"""The modules of nmt import each other without a cycle and only downward, counting imports inside functions too.

Floors, from the bottom: the shared ground (the top-level modules), then ``data``, ``models`` and ``evaluation``
(none imports another stage), then ``model_dir`` (a model with its subword models), then ``decoding``, then
``training`` (whose validation translates and scores the dev set); ``__main__`` sits on top.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


def module_name(path: Path) -> str:
    """``nmt/data/cleaning.py`` -> ``nmt.data.cleaning``; ``nmt/data/__init__.py`` -> ``nmt.data``."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


STAGES = ("data", "models", "evaluation", "decoding", "training")
# What each floor may import besides itself.
ALLOWED = {
    "ground": set(),
    "data": {"ground"},
    "models": {"ground"},
    "evaluation": {"ground"},
    "model_dir": {"ground", "data", "models"},
    "decoding": {"ground", "data", "models", "model_dir"},
    "training": {"ground", "data", "models", "model_dir", "decoding", "evaluation"},
    "__main__": {"ground", "data", "models", "model_dir", "decoding", "evaluation", "training"},
}


def floor(module: str) -> str:
    """The floor of ``module``: its stage subpackage, ``model_dir``, ``__main__`` or the shared ``ground``."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in (*STAGES, "model_dir", "__main__"):
        return parts[1]
    return "ground"


def import_graph() -> dict[str, set[str]]:
    """Module name -> the package's modules it imports (``nmt`` itself is ``nmt/__init__.py``)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
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
    assert "nmt.training.loop" in graph["nmt.__main__"]  # imported inside a function of the CLI
    assert "nmt" in graph["nmt.data.download"]  # from nmt import __version__


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_floor_of_modules():
    assert floor("nmt.data.cleaning") == floor("nmt.data") == "data"
    assert floor("nmt.vocab") == floor("nmt") == "ground"
    assert floor("nmt.model_dir") == "model_dir"


def test_no_import_runs_upward():
    upward = [
        f"{module} ({floor(module)}) imports {other} ({floor(other)})"
        for module, imported in import_graph().items()
        for other in sorted(imported)
        if floor(other) != floor(module) and floor(other) not in ALLOWED[floor(module)]
    ]
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_the_root_holds_only_the_shared_ground_and_stage_packages_define_nothing():
    # 15: the experiment and the reading of its config file (config_file.py) are two modules since issue 56; 16: the
    # systems of many languages (multilingual.py, issue 58), which the experiment holds and the login node reads; 17:
    # which runtime decodes a job (runtime.py, issue 59), which the config check and every decoding job ask.
    assert len(list(PACKAGE.glob("*.py"))) <= 17, sorted(p.name for p in PACKAGE.glob("*.py"))
    for stage in STAGES:
        init = PACKAGE / stage / "__init__.py"
        assert init.is_file() and not init.read_text(encoding="utf-8").strip(), f"{init} must exist and be empty"
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(STAGES)


@pytest.mark.parametrize("command", [["score", "--help"], ["score", "--hyp", "hyp", "--ref", "ref"], ["--version"]])
def test_commands_that_need_no_model_import_no_torch(command, tmp_path):
    """``nmt score`` reads two text files: a login node without torch (and its 1 s import) can run it."""
    for name in ("hyp", "ref"):
        (tmp_path / name).write_text("a small house\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nmt", *command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported, "imports torch"
