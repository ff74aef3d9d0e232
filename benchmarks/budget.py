"""Learning curves against a training budget: dev BLEU per update and per minute of each architecture.

Prepares the default experiment's data with the workflow (download, cleaning, subwords, the binarized
training set, the dev set), then trains each requested run with ``python -m nmt train`` for
``--minutes`` of training time (validation not counted) and prints, per run: updates, minutes, the
best and the last dev BLEU, and the minutes to 90% of the best. Curves go to ``WORKDIR/budget.png``,
figures to ``WORKDIR/budget.json``.

A run is ``NAME=MODEL[,KEY=VALUE...]``: a model of config.yaml (its architecture and training keys, over
the shared ``training`` section, without its training stages: one training on the parallel data) with
training keys overridden, e.g.::

    python benchmarks/budget.py --mirror ../shared/data/mirror --minutes 20 \\
        --run t=transformer,lr_schedule=linear,lr=0.001 --run rnn=rnn --run convs2s=convs2s

With ``--jobs 2`` two trainings run side by side, with ``--threads`` each (default: the cores split).
Every choice of the default config is made on the dev set; test sets are not read here.
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nmt.config import TrainConfig, from_dict  # noqa: E402
from nmt.config_file import parse_model  # noqa: E402
from nmt.evaluation.plots import VALID_COLUMNS, read_log  # noqa: E402
from nmt.training.files import TrainFiles  # noqa: E402


def prepare(workdir: Path, mirror: str, overrides: list[str]) -> dict[str, Path]:
    """Run the workflow up to the binarized training set and the dev set of the first pair of config.yaml."""
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    src, trg = config["pairs"][0].split("-")
    pair, dev = f"{src}-{trg}", config["data"]["dev"]
    files = {
        "train_data": workdir / f"results/{pair}/data/bin/baseline/train",
        "dev_src": workdir / f"results/{pair}/data/eval/{dev}.{src}",
        "dev_ref": workdir / f"results/{pair}/data/eval/{dev}.{trg}",
        "src_spm": workdir / f"results/{pair}/subword/{src}.model",
        "trg_spm": workdir / f"results/{pair}/subword/{trg}.model",
    }
    targets = [files["train_data"].with_suffix(".json"), *(files[k] for k in ("dev_src", "dev_ref", "src_spm"))]
    targets = [str(path.relative_to(workdir)) for path in targets]  # Snakemake's targets: relative to --directory
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    command += ["--configfile", str(REPO / "config.yaml"), "--cores", "2", *targets]
    command += ["--config", f"mirror={mirror}", *overrides]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return {**files, "trg_lang": trg}


def run_spec(spec: str, config: dict) -> tuple[str, dict, dict]:
    """``NAME=MODEL,KEY=VALUE,...`` -> (name, model settings, training keys)."""
    name, _, rest = spec.partition("=")
    model, *pairs = rest.split(",")
    if model not in config["models"]:
        sys.exit(f"--run {spec}: '{model}' is not a model of config.yaml ({', '.join(config['models'])})")
    overrides = {key: yaml.safe_load(value) for key, value in (p.split("=", 1) for p in pairs)}
    options = dict(config["models"][model])
    options["training"] = {**options.get("training", {}), **overrides}
    entry = parse_model(model, options, config.get("training", {}), f"--run {name}")
    return name, entry.settings, dataclasses.asdict(entry.training)


def train(name: str, settings: dict, training: dict, files: dict, workdir: Path, threads: int) -> Path:
    """Train one run into ``WORKDIR/runs/NAME`` (resumes if it was interrupted)."""
    model_dir = workdir / "runs" / name
    training = {**training, "threads": threads, "trg_lang": files["trg_lang"]}
    from_dict(TrainConfig, training, f"--run {name}")  # a bad key fails here, in one line
    command = [sys.executable, "-m", "nmt", "train", "--model-options", json.dumps(settings)]
    paths = {key: files[key] for key in ("train_data", "dev_src", "dev_ref", "src_spm", "trg_spm")}
    command += ["--training", json.dumps(training), *TrainFiles(**paths, model_dir=model_dir).options()]
    command += ["--log-file", str(workdir / f"{name}.log")]
    start = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    print(f"{name}: trained in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return model_dir


def curve_figures(model_dir: Path) -> dict:
    """Updates, minutes, best and last dev BLEU, and the minutes and updates to 90% of the best."""
    valid = read_log(model_dir / "valid.tsv", VALID_COLUMNS)
    best = float(valid["bleu"].max())
    first = valid[valid["bleu"] >= 0.9 * best].iloc[0]
    return {
        "updates": int(valid["step"].iloc[-1]),
        "minutes": round(float(valid["seconds"].iloc[-1]) / 60, 1),
        "best_bleu": round(best, 2),
        "last_bleu": round(float(valid["bleu"].iloc[-1]), 2),
        "minutes_to_90": round(float(first["seconds"]) / 60, 1),
        "updates_to_90": int(first["step"]),
        "curve": valid[["step", "seconds", "bleu"]].values.tolist(),
    }


def plot(results: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_time, by_step) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, figures in results.items():
        steps, seconds, bleu = zip(*figures["curve"], strict=True)
        by_time.plot([s / 60 for s in seconds], bleu, marker=".", label=name)
        by_step.plot(steps, bleu, marker=".", label=name)
    by_time.set(xlabel="training minutes (validation not counted)", ylabel="dev BLEU", title="dev BLEU by time")
    by_step.set(xlabel="updates", ylabel="dev BLEU", title="dev BLEU by updates")
    by_step.legend(loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", default=str(REPO.parent / "shared" / "data" / "mirror"))
    parser.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "work" / "budget")
    parser.add_argument("--run", action="append", required=True, help="NAME=MODEL[,KEY=VALUE...]")
    parser.add_argument("--minutes", type=float, default=20.0, help="training time of each run (max_minutes)")
    parser.add_argument("--max-steps", type=int, default=100000, help="update budget of each run (max_steps)")
    parser.add_argument("--valid-every", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1, help="trainings side by side")
    parser.add_argument("--threads", type=int, help="threads per training (default: 2 cores / jobs)")
    parser.add_argument("--config", nargs="*", default=[], help="workflow --config overrides for the data")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="no training: the table and plot of the runs already in WORKDIR/runs (e.g. of several invocations)",
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    runs = [run_spec(spec, config) for spec in args.run]
    if args.report_only:
        dirs = [args.workdir / "runs" / name for name, _, _ in runs]
    else:
        files = prepare(args.workdir, args.mirror, args.config)
        threads = args.threads or max(1, 2 // args.jobs)
        budget = {"max_minutes": args.minutes, "max_steps": args.max_steps, "valid_every": args.valid_every}
        budget |= {"checkpoint_every": args.valid_every, "patience": 10**6}
        with ThreadPoolExecutor(args.jobs) as pool:
            dirs = list(pool.map(lambda r: train(r[0], r[1], {**r[2], **budget}, files, args.workdir, threads), runs))
    results = {name: curve_figures(model_dir) for (name, _, _), model_dir in zip(runs, dirs, strict=True)}
    (args.workdir / "budget.json").write_text(json.dumps(results, indent=2))
    plot(results, args.workdir / "budget.png")
    print("| run | updates | minutes | best dev BLEU | last dev BLEU | minutes to 90% | updates to 90% |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, f in results.items():
        print(
            f"| {name} | {f['updates']} | {f['minutes']} | {f['best_bleu']} | {f['last_bleu']} | "
            f"{f['minutes_to_90']} | {f['updates_to_90']} |"
        )


if __name__ == "__main__":
    main()
