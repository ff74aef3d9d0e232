"""One version per package: the pins of pyproject.toml are those of the rules' conda env and of the docs."""

import re
import tomllib

import yaml
from conftest import REPO

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;,]+)$")
NAMED_PIN = re.compile(r"\b([A-Za-z][A-Za-z0-9_.-]*)==([0-9][0-9A-Za-z.+]*[0-9A-Za-z])")  # in prose: `name==1.2.3`


def pins(requirements: list[str], where: str) -> dict[str, str]:
    """``{package: version}`` of requirements written ``name==version``; any other form is an error."""
    found = {}
    for requirement in requirements:
        match = PIN.match(requirement.strip())
        assert match, f"{where}: {requirement!r} is not pinned as name==version"
        name, version = match[1].lower(), match[2]
        assert found.get(name, version) == version, f"{where}: {name} pinned twice, {found[name]} and {version}"
        found[name] = version
    return found


def project_pins() -> tuple[dict[str, str], dict[str, str]]:
    """The main dependencies of pyproject.toml, and every pin of it (the extras included)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    main = pins(project["dependencies"], "pyproject.toml")
    extras = [req for reqs in project["optional-dependencies"].values() for req in reqs]
    return main, pins(project["dependencies"] + extras, "pyproject.toml")


def env_pins() -> dict[str, str]:
    """The pip pins of envs/nmt.yaml."""
    env = yaml.safe_load((REPO / "envs" / "nmt.yaml").read_text(encoding="utf-8"))
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item)
    return pins(pip, "envs/nmt.yaml")


def test_the_rules_env_pins_what_pyproject_pins():
    main, every = project_pins()
    env = env_pins()
    assert not main.keys() - env.keys(), f"dependencies missing from envs/nmt.yaml: {sorted(main.keys() - env.keys())}"
    assert not env.keys() - every.keys(), (
        f"envs/nmt.yaml pins what pyproject.toml does not: {env.keys() - every.keys()}"
    )
    differ = {name: (every[name], version) for name, version in env.items() if every[name] != version}
    assert not differ, f"pyproject.toml and envs/nmt.yaml pin other versions (pyproject, env): {differ}"


def test_the_docs_name_the_pinned_versions():
    _, every = project_pins()
    pages = [REPO / "README.md", REPO / "Makefile", *sorted((REPO / "docs").glob("*.md"))]
    named = [
        (page.name, name.lower(), version)
        for page in pages
        for name, version in re.findall(
            r"\b([A-Za-z][A-Za-z0-9_.-]*)==([0-9][0-9A-Za-z.+]*[0-9A-Za-z])", page.read_text()
        )
    ]
    assert named, "no name==version in the docs: the test reads nothing"
    differ = [(page, name, version, every.get(name)) for page, name, version in named if every.get(name) != version]
    assert not differ, f"pins in the docs that are not pyproject.toml's (page, package, docs, pyproject): {differ}"
