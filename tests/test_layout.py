"""The documentation stays true to the tree: docs/overview.md's package layout lists every module of ``nmt/``
and nothing that is gone, every relative link of the README, docs/ and benchmarks/README.md leads to a
file, and the README stays short."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 220


def layout_modules() -> set[str]:
    """The modules of the ``nmt/`` tree in docs/overview.md, as paths below ``nmt/`` (``entry.py``,
    ``data/cleaning.py``): a ``name.py`` line is a module; a ``name/`` line is a subpackage followed by
    its modules, comma-separated, each perhaps with a note in parentheses."""
    text = ROOT.joinpath("docs", "overview.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    tree = next((block for block in blocks if block.splitlines()[0].strip() == "nmt/"), None)
    assert tree is not None, "docs/overview.md has no code block starting with the line 'nmt/'"
    listed = set()
    for line in tree.splitlines()[1:]:
        if match := re.match(r"^  ([a-z0-9_]+\.py)(?:\s|$)", line):
            listed.add(match[1])
        elif match := re.match(r"^  ([a-z0-9_]+)/\s+(.*)$", line):
            names = re.sub(r"\([^()]*\)", "", match[2]).split(",")
            listed.update(f"{match[1]}/{name.strip()}.py" for name in names if name.strip())
    return listed - {"__init__.py"}


def package_modules() -> set[str]:
    """Every module of ``nmt/`` at any depth, as a path below ``nmt/``, without the ``__init__.py`` files."""
    package = ROOT / "nmt"
    return {path.relative_to(package).as_posix() for path in package.rglob("*.py") if path.name != "__init__.py"}


def test_the_overview_layout_lists_every_module_of_nmt_and_no_other():
    modules, listed = package_modules(), layout_modules()
    assert not modules - listed, f"nmt modules missing from docs/overview.md's layout: {sorted(modules - listed)}"
    assert not listed - modules, f"docs/overview.md's layout lists modules that are gone: {sorted(listed - modules)}"


def documentation_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(ROOT.joinpath("docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]


def relative_links(text: str) -> list[str]:
    """The targets of the markdown links ``[text](target)`` outside code, without their ``#anchor``;
    links to a URL (``scheme:``) or within the page (``#anchor``) are left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # fenced code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    targets = [target.split("#", 1)[0] for target in re.findall(r"\]\(([^()\s]+)\)", text)]
    return [target for target in targets if target and not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_the_relative_links_of_the_documentation_lead_to_files():
    pages = documentation_pages()
    assert len(pages) > 3
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]
    assert not broken, f"links to files that do not exist: {broken}"


def test_the_readme_is_short():
    lines = len(ROOT.joinpath("README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details to docs/ (at most {README_MAX_LINES})"
