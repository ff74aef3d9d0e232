"""Compare two runs' ``results/`` trees: the check that a refactor changed no output.

Every file is compared byte for byte, except what records when and how fast it ran: tables (``.csv``, ``.tsv``)
and records (``.json``) are compared without their timing columns and keys, model files (``.pt``) tensor by tensor
(their pickles also hold timings), and logs, Snakemake's benchmarks, plots and renderings of tables are left out.
Prints one line per difference; exits 1 if anything but timings differs.

    python benchmarks/compare_results.py OLD/results NEW/results
"""

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

# What a rerun of the same code changes: times, speeds, dates and the commit that timed them.
TIMING = {"seconds", "train_seconds", "repeats", "tokens_per_second", "sentences_per_second", "speedup"}
TIMING |= {"commit", "date"}
SKIPPED = ("logs/", "benchmarks/", "plots/")


def rendered(path: Path) -> bool:
    """An HTML or markdown rendering of a table compared as its ``.csv``, or a report page."""
    return path.suffix == ".html" or (path.suffix == ".md" and path.with_suffix(".csv").is_file())


def tensors(obj, prefix: str = ""):
    """(name, tensor) of every tensor in a nested dict, e.g. a checkpoint's ``model`` and ``optimizer`` states."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from tensors(value, f"{prefix}.{key}")


def same_tensors(old: Path, new: Path) -> bool:
    a, b = (dict(tensors(torch.load(p, map_location="cpu", weights_only=False))) for p in (old, new))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def same_table(old: Path, new: Path) -> bool:
    a, b = (pd.read_csv(p, sep="\t" if p.suffix == ".tsv" else ",") for p in (old, new))
    keep = [c for c in a.columns if c not in TIMING]
    return list(a.columns) == list(b.columns) and a[keep].equals(b[keep])


def without_timings(record):
    """A JSON record without its timing keys, at any depth."""
    if isinstance(record, dict):
        return {k: without_timings(v) for k, v in record.items() if k not in TIMING}
    if isinstance(record, list):
        return [without_timings(v) for v in record]
    return record


def same(old: Path, new: Path) -> bool:
    if old.read_bytes() == new.read_bytes():
        return True
    if old.suffix == ".pt":
        return same_tensors(old, new)
    if old.suffix in (".csv", ".tsv"):
        return same_table(old, new)
    if old.suffix == ".json":
        return without_timings(json.loads(old.read_text())) == without_timings(json.loads(new.read_text()))
    return False


def compare(old_root: Path, new_root: Path) -> list[str]:
    """The differences, one line each: files on one side only, and files whose content differs."""

    def files(root: Path) -> set[str]:
        paths = [p for p in root.rglob("*") if p.is_file() and not rendered(p)]
        return {rel for rel in (p.relative_to(root).as_posix() for p in paths) if not rel.startswith(SKIPPED)}

    old, new = files(old_root), files(new_root)
    problems = [f"only in {old_root}: {rel}" for rel in sorted(old - new)]
    problems += [f"only in {new_root}: {rel}" for rel in sorted(new - old)]
    for rel in sorted(old & new):
        if not same(old_root / rel, new_root / rel):
            problems.append(f"differs: {rel}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    problems = compare(args.old, args.new)
    print("\n".join(problems) or f"same outputs: {args.old} and {args.new} differ only in timings")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
