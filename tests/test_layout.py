"""The documentation stays true to the tree: docs/overview.md's layouts list every module of ``nmt/``, every rule
file, script and preset of ``workflow/``, and nothing that is gone; every key of the config schema has its
description, and docs/configuration.md's listing of the keys is the schema's; docs/cluster.md's torch-free modules
are those tests/test_envs.py imports without torch; every relative link of the README, docs/ and benchmarks/ leads
to a file, the YAML examples of docs/configuration.md and docs/first_experiment.md are valid configs, and the README
and benchmarks/README.md stay short.

``python tests/test_layout.py`` writes docs/configuration.md's listing of the keys again from the schema."""

import ast
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import yaml
from snakemake.utils import validate

from nmt.config_file import load_experiment

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 220
BENCHMARKS_README_MAX_LINES = 450
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
CONFIGURATION = ROOT / "docs" / "configuration.md"
KEYS_START = "<!-- keys: written from workflow/schemas/config.schema.yaml by `python tests/test_layout.py` -->"
KEYS_END = "<!-- end of keys -->"


def code_blocks(page: str, language: str = "") -> list[str]:
    """The fenced code blocks of a page of the repository (of ``language``'s only, e.g. "yaml", when given), indented
    as the page indents them."""
    text = ROOT.joinpath(page).read_text(encoding="utf-8")
    return re.findall(rf"^ *```{language}[^\n]*\n(.*?)^ *```", text, flags=re.M | re.S)


def layout_modules() -> set[str]:
    """The modules of the ``nmt/`` tree in docs/overview.md, as paths below ``nmt/`` (``entry.py``,
    ``data/cleaning.py``): a ``name.py`` line is a module; a ``name/`` line is a subpackage followed by
    its modules, comma-separated, each perhaps with a note in parentheses."""
    tree = next((block for block in code_blocks("docs/overview.md") if block.splitlines()[0].strip() == "nmt/"), None)
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


def repository_layout() -> dict[str, set[str]]:
    """The names that docs/overview.md's repository layout gives on the lines of ``workflow/rules/`` and
    ``workflow/presets/`` (``folder/  what: name, name, ...``), by folder."""
    tree = next((block for block in code_blocks("docs/overview.md") if block.startswith("Snakefile")), None)
    assert tree is not None, "docs/overview.md has no code block starting with the line 'Snakefile'"
    listed = {}
    for folder in ("workflow/rules/", "workflow/presets/"):
        line = next((line for line in tree.splitlines() if line.startswith(folder + " ")), None)
        assert line is not None and ":" in line, f"docs/overview.md's layout has no line '{folder}  ...: names'"
        listed[folder] = {name.strip() for name in line.split(":", 1)[1].split(",")}
    return listed


def test_the_overview_layout_lists_every_rule_file_and_preset():
    for folder, names in repository_layout().items():
        files = {path.stem for path in ROOT.joinpath(folder).glob("*.smk" if "rules" in folder else "*.yaml")}
        assert names == files, (
            f"docs/overview.md's {folder}: missing {sorted(files - names)}, gone {sorted(names - files)}"
        )


def test_the_overview_stage_table_names_every_rule_script():
    """The script column of docs/overview.md's table of stages holds every script of workflow/scripts/."""
    text = ROOT.joinpath("docs", "overview.md").read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| ") and line.count(" | ") == 3]
    named = {name for row in rows[1:] for name in re.findall(r"`([a-z0-9_]+)\.py`", row[2])}
    scripts = {path.stem for path in ROOT.joinpath("workflow", "scripts").glob("*.py")}
    assert named == scripts, (
        f"docs/overview.md's stages: missing {sorted(scripts - named)}, gone {sorted(named - scripts)}"
    )


def test_the_overview_names_every_command_of_nmt():
    from nmt.__main__ import build_parser

    parser = build_parser()
    commands = next(action for action in parser._actions if action.__class__.__name__ == "_SubParsersAction").choices
    tree = next(block for block in code_blocks("docs/overview.md") if block.startswith("nmt/"))
    line = next(line for line in tree.splitlines() if line.startswith("  __main__.py"))
    listed = set(re.search(r"\(([^()]*)\)", line)[1].replace(" ", "").split(","))
    assert listed == set(commands), (
        f"docs/overview.md's __main__.py line names {sorted(listed)}, not {sorted(commands)}"
    )


def torch_free_modules_tested() -> set[str]:
    """The ``nmt`` modules that tests/test_envs.py imports with a torch that fails to import."""
    tree = ast.parse(ROOT.joinpath("tests", "test_envs.py").read_text(encoding="utf-8"))
    test = next(node for node in tree.body if getattr(node, "name", "") == "test_config_modules_do_not_import_torch")
    code = "".join(
        node.value for node in ast.walk(test) if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    imports = [line.removeprefix("import ") for line in code.splitlines() if line.startswith("import nmt")]
    assert imports, "tests/test_envs.py's test_config_modules_do_not_import_torch imports no nmt module"
    return {part.split(" as ")[0].strip() for line in imports for part in line.split(",")}


def test_the_torch_free_modules_of_the_cluster_page_are_those_tested():
    text = ROOT.joinpath("docs", "cluster.md").read_text(encoding="utf-8")
    match = re.search(r"^The login node needs no torch: (.*?)\n\n", text, flags=re.M | re.S)
    assert match, "docs/cluster.md has no paragraph 'The login node needs no torch: ...'"
    listed = set(re.findall(r"`(nmt(?:\.[a-z0-9_]+)+)`", match[1]))
    tested = torch_free_modules_tested()
    assert listed == tested, f"docs/cluster.md lists {sorted(listed)}; tests/test_envs.py imports {sorted(tested)}"


def schema_keys(node: dict, path: str = "") -> Iterator[tuple[str, dict]]:
    """Every key of the config schema at any depth, as a dotted path (``training.lr``; ``corpora.*.url`` below a
    mapping of names, ``tables.published[].bleu`` in a list), with its schema."""
    for key, sub in node.get("properties", {}).items():
        yield f"{path}{key}", sub
        yield from schema_keys(sub, f"{path}{key}.")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_keys(node["additionalProperties"], f"{path}*.")
    if isinstance(node.get("items"), dict):
        yield from schema_keys(node["items"], f"{path.removesuffix('.')}[].")


def test_every_key_of_the_config_schema_has_a_description():
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    keys = list(schema_keys(schema))
    assert len(keys) > 100
    missing = [path for path, sub in keys if not str(sub.get("description", "")).strip()]
    assert not missing, f"keys of {SCHEMA.relative_to(ROOT)} without a description: {missing}"


def below(node: dict) -> str:
    """The keys below a key of the schema, nested as in a config file: ``{a, b: {c}}``, ``{NAME: {...}}`` for a
    mapping of names, ``[{...}]`` for a list of mappings; empty for a value."""
    if "properties" in node:
        return (
            "{"
            + ", ".join(key + (": " + below(sub) if below(sub) else "") for key, sub in node["properties"].items())
            + "}"
        )
    for key, shape in (("additionalProperties", "{NAME: %s}"), ("items", "[%s]")):
        if isinstance(node.get(key), dict) and below(node[key]):
            return shape % below(node[key])
    return ""


def keys_listing() -> str:
    """docs/configuration.md's listing of the config keys as the schema has them: a row per top-level key."""
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    rows = [f"| `{key}` | {f'`{below(sub)}`' if below(sub) else ''} |" for key, sub in schema["properties"].items()]
    return "\n".join(["| key | keys below it |", "|---|---|", *rows])


def documented_keys(text: str) -> str:
    assert KEYS_START in text and KEYS_END in text, f"docs/configuration.md lacks the markers {KEYS_START} {KEYS_END}"
    return text.split(KEYS_START, 1)[1].split(KEYS_END, 1)[0].strip()


def test_the_configuration_page_lists_the_keys_of_the_schema():
    listed = documented_keys(CONFIGURATION.read_text(encoding="utf-8"))
    assert listed == keys_listing(), (
        "docs/configuration.md's keys differ from the schema: `python tests/test_layout.py`"
    )


def test_the_first_experiments_config_is_valid():
    block = first_experiment_config()
    jsonschema.validate(yaml.safe_load(block), yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))
    assert len(block.splitlines()) <= 15


def first_experiment_config() -> str:
    return next(block for block in code_blocks("docs/first_experiment.md") if block.startswith("# A first experiment"))


@pytest.mark.parametrize(
    "page, base",
    [("docs/configuration.md", (ROOT / "config.yaml").read_text(encoding="utf-8")), ("docs/first_experiment.md", "")],
)
def test_the_yaml_examples_are_valid_configs(page, base):
    """Each YAML example of a page, its sections in place of its base's (config.yaml, or the first experiment's
    config) as a reader would paste them, is a config the workflow accepts: the schema's and the cross-key checks."""
    base = yaml.safe_load(base or first_experiment_config())
    for block in code_blocks(page, "yaml"):
        config = base | yaml.safe_load(textwrap.dedent(block))
        try:
            validate(config, str(SCHEMA))
            load_experiment(config)
        except Exception as e:  # the schema's error or a ConfigError: either names the key
            pytest.fail(f"{page}: the example beginning {block.strip().splitlines()[0]!r} is not valid: {e}")


def write_keys_listing() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    documented_keys(text)
    head, rest = text.split(KEYS_START, 1)
    CONFIGURATION.write_text(f"{head}{KEYS_START}\n{keys_listing()}\n{KEYS_END}{rest.split(KEYS_END, 1)[1]}")


def documentation_pages() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted(ROOT.joinpath("docs").glob("*.md")),
        *sorted(ROOT.joinpath("benchmarks").glob("*.md")),
    ]


def relative_links(text: str) -> list[str]:
    """The targets of the markdown links ``[text](target)`` outside code, ``#anchor`` included; links to a URL
    (``scheme:``) are left out, links within the page (``#anchor``) kept."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # fenced code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    targets = re.findall(r"\]\(([^()\s]+)\)", text)
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lowercased, punctuation but - and _ removed, spaces to -, a
    repeated heading's with -1, -2, ..."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    found, counts = set(), {}
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(f"{slug}-{counts[slug]}" if slug in counts else slug)
        counts[slug] = counts.get(slug, 0) + 1
    return found


def test_the_relative_links_of_the_documentation_lead_to_files_and_headings():
    pages = documentation_pages()
    assert len(pages) > 3
    broken = []
    for page in pages:
        for link in relative_links(page.read_text(encoding="utf-8")):
            path, _, anchor = link.partition("#")
            target = (page.parent / path) if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_readme_is_short():
    lines = len(ROOT.joinpath("README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details to docs/ (at most {README_MAX_LINES})"


def test_the_benchmarks_readme_holds_the_current_tables_only():
    lines = len(ROOT.joinpath("benchmarks", "README.md").read_text(encoding="utf-8").splitlines())
    limit = BENCHMARKS_README_MAX_LINES
    assert lines < limit, f"benchmarks/README.md has {lines} lines; earlier rounds go to benchmarks/history.md"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    write_keys_listing()
