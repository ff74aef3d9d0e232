"""Cleaning speed and memory on a synthetic noisy corpus of real Multi30k sentences; prints a table.

    python benchmarks/clean_speed.py --mirror ../shared/data/mirror --pairs 1000000 --threads 1 2

The corpus repeats Multi30k en-de training pairs (with a running number, so that dedup keeps them)
and mixes in, at fixed shares, the noise real web-crawled corpora have: exact duplicates, empty
sides, invalid UTF-8, over-long lines, junk tokens, untranslated copies, number-only lines, French
in place of German, and misaligned length ratios. Reports pairs/s of `clean_corpus` (all default
filters, language identification included), peak RSS of the cleaning processes, and the report.
"""

import argparse
import gzip
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URL_PATH = "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


def read_gz(mirror: Path, name: str) -> list[str]:
    return gzip.open(mirror / URL_PATH / name, "rt", encoding="utf-8").read().splitlines()


def make_noisy_corpus(mirror: Path, n: int, src_path: Path, trg_path: Path, seed: int = 1) -> None:
    """Write ``n`` line-aligned pairs with about 20% noise of the kinds cleaning must catch."""
    en, de, fr = (read_gz(mirror, f"train.{lang}.gz") for lang in ("en", "de", "fr"))
    rng = random.Random(seed)
    with open(src_path, "wb") as src_f, open(trg_path, "wb") as trg_f:
        for i in range(n):
            j = rng.randrange(len(en))
            src, trg = f"{en[j]} ({i})", f"{de[j]} ({i})"
            kind = rng.random()
            if kind < 0.05:
                src, trg = en[j], de[j]  # exact duplicate of a pair seen before (most likely)
            elif kind < 0.07:
                trg = ""
            elif kind < 0.08:
                src = src.encode() + b" \xff\xfe"  # invalid UTF-8
            elif kind < 0.09:
                src = " ".join([en[j]] * 40)  # too long
            elif kind < 0.10:
                trg = f"{trg} {'x' * 150}"  # junk token
            elif kind < 0.12:
                trg = src  # untranslated copy
            elif kind < 0.13:
                src, trg = f"{i} {i + 1} {i + 2}", f"{i} {i + 1} {i + 2} ."  # numbers only
            elif kind < 0.17:
                trg = fr[j]  # wrong language on the target side
            elif kind < 0.19:
                trg = " ".join(trg.split()[:1])  # misaligned: ratio
            src_f.write((src if isinstance(src, bytes) else src.encode()) + b"\n")
            trg_f.write(trg.encode() + b"\n")


def clean_once(src: Path, trg: Path, out: Path, threads: int) -> None:
    """Run one cleaning in a fresh process, so that its peak RSS (and its workers') is measured alone."""
    code = (
        "import sys, json, resource;"
        "from nmt.data.cleaning import clean_corpus; from nmt.config import CleanConfig;"
        f"r = clean_corpus({str(src)!r}, {str(trg)!r}, {str(out / 'c.en')!r}, {str(out / 'c.de')!r},"
        f" {str(out / 'report.tsv')!r}, CleanConfig(), 'en', 'de', threads={threads});"
        "print(json.dumps(r))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/mirror")
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        make_noisy_corpus(args.mirror, args.pairs, work / "raw.en", work / "raw.de")
        print(f"built {args.pairs:,} noisy pairs ({(work / 'raw.en').stat().st_size / 1e6:.0f} MB English) "
              f"in {time.perf_counter() - start:.0f} s")  # fmt: skip
        print("| threads | seconds | pairs/s | peak RSS, largest process (MB) |")
        print("|---:|---:|---:|---:|")
        for threads in args.threads:
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            clean_once(work / "raw.en", work / "raw.de", work, threads)
            seconds = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            peak_text = f"{peak / 1024:.0f}" if peak > before else f"<= {before / 1024:.0f}"
            print(f"| {threads} | {seconds:.0f} | {args.pairs / seconds:,.0f} | {peak_text} |")
        print()
        print((work / "report.md").read_text())


if __name__ == "__main__":
    main()
