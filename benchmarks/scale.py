"""Rehearsal at WMT scale: every data stage and the start of training on millions of synthetic pairs.

    python benchmarks/scale.py --pairs 1000000 5000000 --workdir /tmp/scale

For each size it writes a synthetic parallel corpus with sentence lengths like WMT news (2-3 aligned
Multi30k pairs glued together, a long tail up to 6; mean about 28 English words; 3% exact duplicates;
deterministic from ``--seed``), then runs, each in its own process: cleaning (the WMT presets'
filters, language identification included), sentencepiece (joint BPE at the presets' vocabulary and
``input_sentence_size``), binarization, and the start of training (the ``small`` Transformer, 2
processes under torchrun, ``--updates`` updates). Per stage it prints the wall time, pairs/s and the
peak RSS of the stage's processes (``ru_maxrss`` from ``os.wait4``: the largest of the process and
its waited-for children). For training it samples ``RssAnon`` and ``RssFile`` of every rank from
``/proc/PID/status`` until the last update, and reads the time of the first update from the log.
The numbers go to ``WORKDIR/PAIRS/scale.json`` too.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
MULTI30K = "raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
# Multi30k pairs glued into one pair of WMT news length: 2 to 6 (mean 2.3, about 28 English words). Never
# one alone: 29,000 single sentences would repeat more and more often as the corpus grows.
GLUE_WEIGHTS = {2: 0.8, 3: 0.15, 4: 0.03, 5: 0.015, 6: 0.005}
DUPLICATES = 0.03  # share of pairs that repeat one of the last 1,000
STAGES = ("generate", "clean", "subword", "binarize", "train")


def generate(mirror: Path, pairs: int, src_path: Path, trg_path: Path, seed: int) -> None:
    """Write ``pairs`` aligned lines to ``src_path`` (English) and ``trg_path`` (German), streaming."""
    en, de = (
        gzip.open(mirror / MULTI30K / f"train.{lang}.gz", "rt", encoding="utf-8").read().split("\n")[:-1]
        for lang in ("en", "de")
    )
    rng = random.Random(seed)
    counts, weights = list(GLUE_WEIGHTS), list(GLUE_WEIGHTS.values())
    recent: deque[tuple[str, str]] = deque(maxlen=1000)
    with open(src_path, "w", encoding="utf-8") as src_f, open(trg_path, "w", encoding="utf-8") as trg_f:
        for _ in range(pairs):
            if recent and rng.random() < DUPLICATES:
                src, trg = rng.choice(recent)
            else:
                picks = [rng.randrange(len(en)) for _ in range(rng.choices(counts, weights)[0])]
                src, trg = " ".join(en[j] for j in picks), " ".join(de[j] for j in picks)
                recent.append((src, trg))
            src_f.write(src + "\n")
            trg_f.write(trg + "\n")


def run_measured(argv: list[str], log: Path) -> tuple[float, float]:
    """Run ``argv`` (output to ``log``); return its wall time (s) and peak RSS (MB) of it and its children."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with open(log, "wb") as log_file:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-8:]
        sys.exit(f"{argv[:3]} failed; {log}:\n" + "\n".join(tail))
    return seconds, usage.ru_maxrss / 1024


def python_stage(code: str, log: Path) -> tuple[float, float]:
    return run_measured([sys.executable, "-c", code], log)


def stage_code(stage: str, work: Path, args: argparse.Namespace) -> str:
    """The Python code of one data stage, run in a fresh process."""
    w = repr(str(work))
    if stage == "generate":
        return (
            "from pathlib import Path; import sys; sys.path.insert(0, 'benchmarks'); from scale import generate;"
            f"w, m = Path({w}), Path({str(args.mirror)!r});"
            f"generate(m, {args.pairs}, w / 'raw.en', w / 'raw.de', {args.seed})"
        )
    if stage == "clean":
        return (
            "from pathlib import Path; from nmt.data.cleaning import clean_corpus; from nmt.config import CleanConfig;"
            f"w = Path({w}); clean_corpus(w / 'raw.en', w / 'raw.de', w / 'clean.en', w / 'clean.de', w / 'clean.tsv',"
            f" CleanConfig(max_length=250, max_ratio=2.5), 'en', 'de', threads={args.threads})"
        )
    if stage == "subword":
        return (
            "from pathlib import Path; from nmt.data.subword import train_subword; "
            "from nmt.config import SubwordConfig;"
            f"w = Path({w}); train_subword([w / 'clean.en'], [w / 'clean.de'], w / 'spm.en.model', w / 'spm.de.model',"
            f" SubwordConfig(vocab_size={args.vocab_size}, input_sentence_size={args.spm_sentences}),"
            f" threads={args.threads})"
        )
    return (
        "from pathlib import Path; import json; from nmt.data.binarize import binarize;"
        f"w = Path({w}); h = binarize(w / 'clean.en', w / 'clean.de', w / 'spm.en.model', w / 'spm.de.model',"
        f" w / 'bin' / 'train', max_length={args.max_length}, threads={args.threads}); print(json.dumps(h))"
    )


def rss_kb(pid: int) -> dict[str, int]:
    """``RssAnon`` and ``RssFile`` (kB) of a process from ``/proc/PID/status``; empty once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in lines if line.startswith(("RssAnon", "RssFile")))
    return {name: int(value.split()[0]) for name, value in fields.items()}


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def sample_ranks(
    agent: int, samples: list[tuple[float, int, dict]], done: threading.Event, interval: float = 0.1
) -> None:
    """Append (time, pid, RSS) of every process that torchrun's ``agent`` (a pid) started, until ``done`` is set.

    ``done``, not ``Popen.poll``: polling would reap the agent, and the caller's ``os.wait4`` would then find no child.
    """
    while not done.is_set():
        now = time.time()
        for pid in children(agent):
            rss = rss_kb(pid)
            if rss:
                samples.append((now, pid, rss))
        done.wait(interval)


def log_times(log: Path) -> dict[int, float]:
    """The time (epoch seconds) of each ``step N`` line of a training log."""
    times = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        if " step " in line and " | epoch " in line:
            stamp, step = line[:23], int(line.split(" step ", 1)[1].split()[0])
            times[step] = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return times


def torchrun_argv(processes: int, nmt_args: list[str]) -> list[str]:
    """:func:`nmt.training.distributed.torchrun_command`, asked of a child process.

    This process must not import torch: a child's ``ru_maxrss`` starts at its parent's resident
    size (Linux copies the parent's high-water mark on fork and exec), so a parent holding torch's
    200 MB would put a floor under every later stage's peak RSS.
    """
    code = (
        "import json, sys; from nmt.training.distributed import torchrun_command;"
        "print(json.dumps(torchrun_command(int(sys.argv[1]), json.loads(sys.argv[2]))))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", code, str(processes), json.dumps(nmt_args)]
    return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout)


def train_stage(work: Path, args: argparse.Namespace) -> dict:
    """Start training (small Transformer, 2 processes) on the binarized data; measure memory and timing."""
    for side in ("en", "de"):  # a small dev set: validation is not what is measured here
        with open(work / f"clean.{side}", encoding="utf-8") as f, open(work / f"dev.{side}", "w") as dev:
            dev.writelines(line for _, line in zip(range(50), f, strict=False))
    training = {
        "max_steps": args.updates,
        "log_every": 1,
        "valid_every": args.updates,
        "valid_metric": "loss",
        "checkpoint_every": args.updates,
        "batch_tokens": args.batch_tokens,
        "max_length": args.max_length,
        "warmup_steps": 10,
        "device": "cpu",
        "threads": 1,
    }
    model_dir, log = work / "model", work / "train.log"
    shutil.rmtree(model_dir, ignore_errors=True)
    log.unlink(missing_ok=True)
    argv = torchrun_argv(
        2,
        [
            "train",
            "--model-options",
            json.dumps({"arch": "transformer", "size": "small"}),
            "--training",
            json.dumps(training),
            "--train-data",
            str(work / "bin" / "train"),
            "--dev-src",
            str(work / "dev.en"),
            "--dev-ref",
            str(work / "dev.de"),
            "--src-spm",
            str(work / "spm.en.model"),
            "--trg-spm",
            str(work / "spm.de.model"),
            "--model-dir",
            str(model_dir),
            f"--log-file={log}",
        ],
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    samples: list[tuple[float, int, dict]] = []
    start = time.time()
    with open(work / "torchrun.log", "wb") as out:
        agent = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        done = threading.Event()
        sampler = threading.Thread(target=sample_ranks, args=(agent.pid, samples, done))
        sampler.start()
        try:
            _, status, usage = os.wait4(agent.pid, 0)
        finally:
            done.set()
            sampler.join()
        agent.returncode = os.waitstatus_to_exitcode(status)
    if agent.returncode != 0:
        sys.exit(f"training failed; {work / 'torchrun.log'} and {log}")
    steps = log_times(log)
    last = steps[max(steps)]
    ranks = {}
    for when, pid, rss in sorted(samples, key=lambda sample: sample[1]):
        if when <= last:
            peak = ranks.setdefault(pid, {"RssAnon": 0, "RssFile": 0, "total": 0})
            for name, kb in (*rss.items(), ("total", sum(rss.values()))):
                peak[name] = max(peak[name], kb / 1024)
    result = {
        "parameters": json.loads((model_dir / "summary.json").read_text())["parameters"],
        "first_update_s": steps[1] - start,
        "updates": max(steps),
        "updates_s": last - steps[1],
        "peak_mb_per_rank": list(ranks.values()),
        "peak_rss_mb_all": usage.ru_maxrss / 1024,
        "samples": len(samples),
    }
    for rank, peak in enumerate(ranks.values()):
        print(
            f"{args.pairs:>9,} train r{rank}  first update after {result['first_update_s']:.1f} s; "
            f"peak RssAnon {peak['RssAnon']:,.0f} MB, RssFile {peak['RssFile']:,.0f} MB",
            flush=True,
        )
    return result


def run_size(args: argparse.Namespace) -> dict:
    """Run every stage on ``args.pairs`` pairs in ``args.workdir/PAIRS``; return the measurements."""
    work = args.workdir / str(args.pairs)
    work.mkdir(parents=True, exist_ok=True)
    results = {"pairs": args.pairs, "stages": {}}
    for stage in args.stages:
        if stage == "train":
            results["train"] = train_stage(work, args)
            continue
        seconds, peak_mb = python_stage(stage_code(stage, work, args), work / f"{stage}.log")
        results["stages"][stage] = {"seconds": seconds, "pairs_per_s": args.pairs / seconds, "peak_rss_mb": peak_mb}
        print(
            f"{args.pairs:>9,} {stage:<9} {seconds:8.1f} s {args.pairs / seconds:>10,.0f} pairs/s "
            f"{peak_mb:8,.0f} MB peak RSS",
            flush=True,
        )
    previous = json.loads((work / "scale.json").read_text()) if (work / "scale.json").is_file() else {}
    results["stages"] = {**previous.get("stages", {}), **results["stages"]}
    results = {**previous, **results}
    results["clean"] = {
        line.split("\t")[0]: int(line.split("\t")[1]) for line in (work / "clean.tsv").read_text().splitlines()[1:]
    }
    results["binarize"] = json.loads((work / "binarize.log").read_text().splitlines()[-1])
    globs = {"raw": "raw.*", "clean": "clean.??", "binarized": "bin/train.*"}
    results["disk_mb"] = {name: sum(p.stat().st_size for p in work.glob(glob)) / 1e6 for name, glob in globs.items()}
    (work / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def summarize(workdir: Path, sizes: list[int]) -> None:
    """Print each stage's time per pair and peak RSS at every size, and the growth from the smallest to the largest."""
    runs = [json.loads((workdir / str(n) / "scale.json").read_text()) for n in sizes]
    print(f"\n| stage | {' | '.join(f'{n:,} pairs: s, µs/pair, MB' for n in sizes)} | µs/pair ratio |")
    print(f"|---|{'---:|' * len(sizes)}---:|")
    for stage in STAGES[1:-1]:
        cells = [run["stages"].get(stage) for run in runs]
        if None in cells:
            continue
        per_pair = [1e6 * c["seconds"] / run["pairs"] for c, run in zip(cells, runs, strict=True)]
        text = [f"{c['seconds']:,.0f}, {u:.0f}, {c['peak_rss_mb']:,.0f}" for c, u in zip(cells, per_pair, strict=True)]
        print(f"| {stage} | {' | '.join(text)} | {per_pair[-1] / per_pair[0]:.2f} |")
    trained = [run for run in runs if "train" in run]
    for run in trained:
        anon = max(rank["RssAnon"] for rank in run["train"]["peak_mb_per_rank"])
        file = max(rank["RssFile"] for rank in run["train"]["peak_mb_per_rank"])
        model = run["train"].get("parameters", 0) * 4 * 4 / 2**20  # fp32 weights, gradients, Adam's two moments
        print(
            f"train {run['pairs']:,} pairs: first update after {run['train']['first_update_s']:.1f} s, "
            f"peak RssAnon {anon:,.0f} MB, RssFile {file:,.0f} MB (per rank, largest); "
            f"model + gradients + Adam {model:,.0f} MB"
        )
    if len(trained) > 1:
        anon = [max(rank["RssAnon"] for rank in run["train"]["peak_mb_per_rank"]) for run in trained]
        growth = (anon[-1] - anon[0]) * 2**20 / (trained[-1]["pairs"] - trained[0]["pairs"])
        print(f"RssAnon growth per training pair: {growth:.1f} bytes")


def preset_spm_sentences() -> int:
    """The sentencepiece sample of the WMT14 en-de preset (``subword.input_sentence_size``)."""
    preset = yaml.safe_load((REPO / "workflow/presets/wmt14_en_de.yaml").read_text(encoding="utf-8"))
    return preset["subword"]["input_sentence_size"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared/data/mirror")
    parser.add_argument("--workdir", type=Path, required=True, help="corpora and results go to WORKDIR/PAIRS/")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="threads of cleaning, sentencepiece and binarize")
    parser.add_argument("--vocab-size", type=int, default=32000, help="the WMT presets' joint vocabulary")
    parser.add_argument("--spm-sentences", type=int, default=preset_spm_sentences(), help="the WMT presets' sample")
    parser.add_argument("--max-length", type=int, default=128, help="subwords per sentence (training's default)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=STAGES, help="later ones reuse earlier outputs")
    parser.add_argument("--updates", type=int, default=60, help="training updates (the peak needs a long batch)")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    args = parser.parse_args()
    sizes = args.pairs
    print(f"{'pairs':>9} {'stage':<9} {'wall':>10} {'throughput':>18} {'memory':>21}")
    for pairs in sizes:
        args.pairs = pairs
        run_size(args)
    summarize(args.workdir, sizes)


if __name__ == "__main__":
    main()
