"""Back-translation speed: sentences/s of the reverse model's greedy search, torch against CTranslate2; prints a table.

    python benchmarks/backtranslation_speed.py --model results/en-de/backtranslation/reverse \
        --mono results/en-de/data/mono/mono.de --sentences 10000 --threads 2

Each runtime is a whole ``python -m nmt translate`` process over the first ``--sentences`` lines of
``--mono`` (a default run writes both paths), greedy search in batches of ``--batch-size`` sentences,
as the ``backtranslate_part`` rule runs it: torch in float32, torch with bfloat16 weights
(``--bf16 on``), and CTranslate2 (``--runtime ctranslate2``, float32, the model exported at start-up).
The table gives wall seconds, sentences/s, peak RSS and the number of output lines that differ from
torch float32's (CTranslate2's greedy output is meant to be identical: 0).
"""

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

from toolkits.command import Command, CommandFailed, Measured, run_measured, thread_env

RUNS = {
    "torch fp32": [],
    "torch bf16 weights": ["--bf16", "on"],
    "ctranslate2 fp32": ["--runtime", "ctranslate2"],
}


def run(model: Path, src: Path, out: Path, options: list[str], batch_size: int, threads: int) -> Measured:
    """Wall seconds and peak RSS of one translate process."""
    argv = [sys.executable, "-m", "nmt", "translate", "--model", str(model), "--method", "greedy"]
    argv += ["--batch-size", str(batch_size), "--device", "cpu", "--input", str(src), "--output", str(out), *options]
    return run_measured(Command(argv, env=thread_env(threads)), out.with_suffix(".log"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=Path("results/en-de/backtranslation/reverse"))
    parser.add_argument("--mono", type=Path, default=Path("results/en-de/data/mono/mono.de"))
    parser.add_argument("--sentences", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=128, help="as config.yaml's bt_tagged generation")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    args = parser.parse_args()
    for path in (args.model, args.mono):
        if not path.exists():
            sys.exit(f"error: {path} not found (a default run writes it; or pass --model/--mono)")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        with open(args.mono, encoding="utf-8") as f:
            src.write_text("".join(itertools.islice(f, args.sentences)), encoding="utf-8")
        n = sum(1 for _ in open(src, encoding="utf-8"))
        print(f"{n} sentences of {args.mono}, greedy, batches of {args.batch_size}, {args.threads} threads\n")
        print("| runtime | wall s | sentences/s | peak RSS MiB | lines differing from torch fp32 |")
        print("|---|---:|---:|---:|---:|")
        reference = None
        for name in args.runs:
            out = Path(tmp) / f"{name.replace(' ', '-')}.out"
            measured = run(args.model, src, out, RUNS[name], args.batch_size, args.threads)
            seconds, rss = measured.seconds, measured.peak_rss_mb
            hyps = out.read_text(encoding="utf-8").splitlines()
            differ = "-" if reference is None else str(sum(a != b for a, b in zip(hyps, reference, strict=True)))
            reference = hyps if name == "torch fp32" else reference
            print(f"| {name} | {seconds:.1f} | {n / seconds:.0f} | {rss:.0f} | {differ} |", flush=True)


if __name__ == "__main__":
    try:
        main()
    except CommandFailed as e:
        sys.exit(f"error: {e}")
