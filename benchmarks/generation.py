"""Generation at scale: back-translation (greedy, sampling, beam) and the teacher's beam search, each in PyTorch and
in CTranslate2 with float32 and int8 weights; prints a markdown table. Optionally the downstream check of int8.

    python benchmarks/generation.py --run /work/runs/final/results/en-de --mirror ../shared/data/mirror \
        --sentences 20000 --threads 2

The models of a run's results folder: the reverse model (``backtranslation/reverse``) back-translates the first
``--sentences`` lines of the Multi30k task-2 captions in its source language (German for en-de, from the mirror), the
teacher (``transformer/baseline/seed1/model``) translates those in its own (English). Beam search is beam 5, alpha 1,
``--length-normalization ctranslate2`` in every runtime: the search both runtimes run alike (the default run's
``decoding`` is GNMT's, which CTranslate2 does not run). Batches as the default run's: 128 sentences for greedy
search and sampling (its back-translation), 64 for beam search (``decoding``).

Each row is a whole ``python -m nmt translate`` process on ``--threads`` threads, as a workflow job runs it: on
the model directory (torch), or on its export with each weight type, made once beforehand as the workflow's
export_model makes it (``nmt export``, timed on its own). The table gives wall seconds, sentences/s, target tokens/s
per core (output subwords with EOS, by the target subword model, per second and thread), the share of output lines
identical to PyTorch's (sampling: none expected, CTranslate2 draws from its own generator), the process's peak RSS
and the speed relative to PyTorch's.

``--downstream WORKDIR`` runs the workflow instead, on ``--downstream-config`` (config.yaml) with one of its
back-translation variants generated twice in CTranslate2, with float32 and with int8 weights: the back-translation
system trained on each (one seed), its dev BLEU and test BLEU. It trains the reverse model and three systems (hours);
``-n`` shows the jobs.
"""

import argparse
import csv
import gzip
import itertools
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import yaml
from toolkits.command import Command, CommandFailed, Measured, run_measured, thread_env

REPO = Path(__file__).resolve().parents[1]
TASK2 = "raw.githubusercontent.com/multi30k/dataset/master/data/task2/raw/train.{n}.{lang}.gz"  # in the mirror
BEAM = ["--method", "beam", "--beam-size", "5", "--length-penalty", "1.0", "--length-normalization", "ctranslate2"]
WEIGHTS = ("float32", "int8")
RUNTIMES = ("torch", *(f"ctranslate2 {weights}" for weights in WEIGHTS))
HEADER = "| job | runtime | wall s | sentences/s | target tok/s per core | identical to torch | peak RSS MiB | speed |"


@dataclass(frozen=True)
class Job:
    name: str
    model: str  # which model: reverse or teacher
    search: list[str]  # nmt translate's options


JOBS = {
    "bt-greedy": Job("back-translation, greedy", "reverse", ["--method", "greedy", "--batch-size", "128"]),
    "bt-sample": Job("back-translation, sampling", "reverse", ["--method", "sample", "--batch-size", "128"]),
    "bt-beam": Job("back-translation, beam 5", "reverse", [*BEAM, "--batch-size", "64"]),
    "teacher-beam": Job("teacher, beam 5", "teacher", [*BEAM, "--batch-size", "64"]),
}


def captions(mirror: Path, lang: str, n: int) -> list[str]:
    """The first ``n`` Multi30k task-2 captions of ``lang`` (train.1, then train.2, ...) from the mirror."""
    files = [mirror / TASK2.format(n=k, lang=lang) for k in range(1, 6)]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        sys.exit(f"error: {missing[0]} not found (give --mirror, or --mono FILE)")
    lines = itertools.chain.from_iterable(gzip.open(f, "rt", encoding="utf-8") for f in files)
    return [line.rstrip("\n") for line in itertools.islice(lines, n)]


def export(model: Path, out: Path, quantization: str) -> Measured:
    """``nmt export`` of ``model`` into ``out`` with ``quantization`` weights, as the workflow's export_model."""
    argv = [sys.executable, "-m", "nmt", "export", str(model), str(out), "--quantization", quantization]
    return run_measured(Command(argv, env=thread_env(1), cwd=REPO), out.with_suffix(".log"))


def translate(model: Path, runtime: str, job: Job, src: Path, out: Path, threads: int) -> Measured:
    """One whole translate process of ``job``'s search on ``model`` (a model directory or an export)."""
    argv = [sys.executable, "-m", "nmt", "translate", "--model", str(model), "--runtime", runtime, *job.search]
    argv += ["--device", "cpu", "--threads", str(threads), "--input", str(src), "--output", str(out)]
    return run_measured(Command(argv, env=thread_env(threads), cwd=REPO), out.with_suffix(".log"))


def target_tokens(hyps: list[str], trg_spm: Path) -> int:
    """Output subwords with EOS (none for an empty line), by the target subword model."""
    sp = spm.SentencePieceProcessor(model_file=str(trg_spm))
    return sum(len(ids) + 1 for ids in sp.encode([h for h in hyps if h]))


def row(job: Job, runtime: str, measured: Measured, hyps: list[str], torch: dict, tokens: int, threads: int) -> str:
    """A row of the table; ``torch``: the PyTorch row's hypotheses and seconds."""
    if runtime == "torch":
        same, speed = "-", "1"
    else:
        identical = sum(a == b for a, b in zip(hyps, torch["hyps"], strict=True)) / len(hyps)
        same = "n/a (own generator)" if "sample" in job.search else f"{100 * identical:.1f}%"
        speed = f"{torch['seconds'] / measured.seconds:.2f}x"
    cells = [job.name, runtime, f"{measured.seconds:.1f}", f"{len(hyps) / measured.seconds:.1f}"]
    cells += [f"{tokens / measured.seconds / threads:.0f}", same, f"{measured.peak_rss_mb:.0f}", speed]
    return "| " + " | ".join(cells) + " |"


def run_jobs(models: dict[str, Path], sources: dict[str, list[str]], jobs: list[str], threads: int, tmp: Path) -> None:
    """Export each model with both weight types, then run and tabulate every job in every runtime."""
    exports: dict[tuple[str, str], Path] = {}
    for name, model in models.items():
        for weights in WEIGHTS:
            done = next((out for (other, w), out in exports.items() if (models[other], w) == (model, weights)), None)
            if done is None:
                done = tmp / f"{name}-{weights}"
                measured = export(model, done, weights)
                print(f"export of the {name} model ({model}), {weights}: {measured.seconds:.1f} s", flush=True)
            exports[name, weights] = done
    print(f"\n{HEADER}\n|---|---|---:|---:|---:|---:|---:|---:|")
    for key in jobs:
        job = JOBS[key]
        src = tmp / f"{key}.src"
        src.write_text("".join(line + "\n" for line in sources[job.model]), encoding="utf-8")
        torch: dict = {}
        for runtime in RUNTIMES:
            model = models[job.model] if runtime == "torch" else exports[job.model, runtime.split()[1]]
            out = tmp / f"{key}-{runtime.replace(' ', '-')}.out"
            measured = translate(model, runtime.split()[0], job, src, out, threads)
            hyps = out.read_text(encoding="utf-8").splitlines()
            if runtime == "torch":
                torch = {"hyps": hyps, "seconds": measured.seconds}
            tokens = target_tokens(hyps, models[job.model] / "trg.model")
            print(row(job, runtime, measured, hyps, torch, tokens, threads), flush=True)


def source_lang(model: Path) -> str:
    """The source language of a model directory (its meta.json)."""
    meta = model / "meta.json"
    if not meta.is_file():
        sys.exit(f"error: {meta} not found: give --mono FILE for a model without it")
    return json.loads(meta.read_text(encoding="utf-8"))["src_lang"]


def downstream(args: argparse.Namespace) -> None:
    """The workflow on ``--downstream-config`` with its variant ``--downstream-variant`` (the first) generated in
    CTranslate2 twice, float32 and int8 (beam search with length_normalization ctranslate2), one seed, no
    distillation; then the dev BLEU of the back-translation system trained on each, and its test sets' BLEU."""
    config = yaml.safe_load(args.downstream_config.read_text(encoding="utf-8"))
    bt = config["backtranslation"]
    name = args.downstream_variant or next(iter(bt["variants"]))
    variant = bt["variants"][name]
    generation = {**variant.get("generation", {}), "runtime": "ctranslate2"}
    if generation.get("method", "beam") == "beam":
        generation["length_normalization"] = "ctranslate2"
    bt["variants"] = {f"bt_{q}": {**variant, "generation": {**generation, "quantization": q}} for q in WEIGHTS}
    config["models"] = {model: config["models"][model] for model in bt["models"]}
    config["seeds"] = [1]
    config.pop("distillation", None)
    args.downstream.mkdir(parents=True, exist_ok=True)
    (args.downstream / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    argv += ["--directory", str(args.downstream), "--cores", str(args.threads)]
    argv += ["--config", f"mirror={args.mirror.resolve()}", *(["-n"] if args.n else [])]
    print(f"variant {name} generated with float32 and int8 weights: {' '.join(argv)}", flush=True)
    if subprocess.run(argv).returncode != 0:
        sys.exit("error: the workflow failed (its log is above)")
    if args.n:
        return
    scores = list(csv.DictReader(open(args.downstream / "results" / "tables" / "scores.csv", encoding="utf-8")))
    print("\n| synthetic sources | model | dev BLEU | test set | test BLEU |\n|---|---|---:|---|---:|")
    for pair, model, q in itertools.product(config["pairs"], config["models"], WEIGHTS):
        summary = args.downstream / "results" / pair / model / f"bt_{q}" / "seed1" / "model" / "summary.json"
        dev = json.loads(summary.read_text())["valid"]["bleu"]
        for score in (s for s in scores if (s["pair"], s["model"], s["stage"]) == (pair, model, f"bt_{q}")):
            print(f"| {q} | {pair} {model} | {dev:.2f} | {score['testset']} | {float(score['bleu']):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, help="a pair's results folder, e.g. results/en-de")
    parser.add_argument("--reverse-model", type=Path, help="default: RUN/backtranslation/reverse")
    parser.add_argument("--teacher-model", type=Path, help="default: RUN/transformer/baseline/seed1/model")
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "data" / "mirror")
    parser.add_argument("--mono", type=Path, help="the source text of every job instead of the mirror's captions")
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    parser.add_argument("--downstream", type=Path, metavar="WORKDIR", help="run the downstream check there instead")
    parser.add_argument("--downstream-config", type=Path, default=REPO / "config.yaml")
    parser.add_argument("--downstream-variant", help="the variant of its backtranslation section (default: the first)")
    parser.add_argument("-n", action="store_true", help="with --downstream: only show the workflow's jobs")
    args = parser.parse_args()
    if args.downstream:
        return downstream(args)
    models = {
        "reverse": args.reverse_model or (args.run and args.run / "backtranslation" / "reverse"),
        "teacher": args.teacher_model or (args.run and args.run / "transformer" / "baseline" / "seed1" / "model"),
    }
    models = {name: model for name, model in models.items() if any(JOBS[j].model == name for j in args.jobs)}
    for name, model in models.items():
        if model is None or not (model / "model.pt").is_file():
            sys.exit(f"error: no {name} model ({model}): give --run or --{name}-model")
    if args.mono:
        lines = args.mono.read_text(encoding="utf-8").splitlines()[: args.sentences]
        sources = dict.fromkeys(models, lines)
    else:
        sources = {name: captions(args.mirror, source_lang(model), args.sentences) for name, model in models.items()}
    print(", ".join(f"{name}: {len(lines)} sentences" for name, lines in sources.items()), f"{args.threads} threads")
    with tempfile.TemporaryDirectory() as tmp:
        run_jobs(models, sources, args.jobs, args.threads, Path(tmp))


if __name__ == "__main__":
    try:
        main()
    except CommandFailed as e:
        sys.exit(f"error: {e}")
