"""The README's Layout section lists the package's modules, one line each, and nothing that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_modules() -> set[str]:
    """The ``nmt/`` module names of the README's Layout tree (its indented ``name.py`` lines)."""
    section = ROOT.joinpath("README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^  ([a-z0-9_]+\.py) ", section, flags=re.M))


def test_the_readme_layout_lists_every_module_of_nmt_and_no_other():
    modules = {path.name for path in ROOT.joinpath("nmt").glob("*.py")} - {"__init__.py"}
    listed = layout_modules()
    assert not modules - listed, f"nmt modules missing from the README's Layout: {sorted(modules - listed)}"
    assert not listed - modules, f"the README's Layout lists modules that do not exist: {sorted(listed - modules)}"
