"""Quality per CPU minute against a peer: fairseq's published Multi30k recipe, trained for the CPU time of our
default Transformer on the same machine, against that Transformer on dev and test2016; prints a table.

    python benchmarks/peer_recipe.py --mirror ../shared/data/mirror \
        --ours results/en-de/transformer/baseline/seed1 [--cpu-minutes M] [--threads 1] [--name NAME]

The peer is fairseq 0.12's ``transformer_tiny`` trained as Wu et al. (2021) train their text-only Multi30k
baseline (``TRANSFORMER_TINY`` in ``toolkits/fairseq.py``: the architecture as fairseq defines it, dropout 0.3,
lr 0.005 after 2,000 warm-up updates, inverse square root, batches of 4,096 tokens, label smoothing 0.1, Adam
(0.9, 0.98)), on Multi30k's training pairs as served, cut into pieces by our run's own joint sentencepiece model
(``--ours``'s ``model/src.model``), so both systems see the same pieces and vocabulary. fairseq is installed
into its own environment under ``--work`` the first time (``toolkits/fairseq.py``).

The budget is CPU time (user + system) of the training process's updates, from the start of the first update to
the end of the one that spends it (``toolkits/fairseq_train.py``: fairseq's own ``--stop-time-hours`` check after
every update, on a CPU-time clock); start-up, loading the data and the final save are outside it, as our
``summary.json``'s ``train_seconds`` counts the updates only. Without ``--cpu-minutes`` the budget is our run's
``train_seconds``: wall seconds of its updates on one thread (``threads: 1``, beside another training), which a
single-threaded process spends as CPU seconds when it has a core; the peer trains with ``--threads`` (default 1)
likewise. The measured process's whole CPU time goes to the JSON file as well.

Both rows decode with beam 5 and are scored against the same references: BLEU is cased sacreBLEU on the
detokenized output (the README's tables), BLEU (lc tok) is ``nmt.evaluation.tokenized_bleu`` against the official
``*.lc.norm.tok.de`` files (the published Multi30k figures). Our test output is the run's
``translations/test_2016_flickr.de``; our dev output is decoded here (``python -m nmt translate``, beam 5, the
decoding defaults), as the pipeline scores dev only greedily during validation.

Writes ``<work>/runs/peer_recipe/<name>/results.json`` (rows, budget, machine, commit, command) beside the run's
logs, checkpoint and outputs; the same command with the same ``--name`` reuses a finished training.
"""

import argparse
import json
import shlex
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import sacrebleu
from toolkits.command import Command, CommandFailed, run_measured, thread_env
from toolkits.fairseq import CPU_REPORT, TRANSFORMER_TINY, Fairseq
from toolkits.task import Task, prepare_multi30k

from nmt.atomic import hash_file, write_text
from nmt.data.download import download
from nmt.evaluation.distillation import code_commit, cpu_model
from nmt.evaluation.tokenized_bleu import score_tokenized_bleu

MULTI30K_TOK = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok"
TOKENIZED_REFS = {"dev": "val.lc.norm.tok.de", "test": "test_2016_flickr.lc.norm.tok.de"}
OUR_TEST_OUTPUT = "translations/test_2016_flickr.de"
BEAM_SIZE = 5


@dataclass
class Row:
    """One system's line of the table; ``cpu_minutes`` of its training updates."""

    system: str
    cpu_minutes: float
    updates: int
    dev_bleu: float
    dev_bleu_lc_tok: float
    test_bleu: float
    test_bleu_lc_tok: float


@dataclass
class OurRun:
    """What the table needs of a pipeline run directory (``results/{pair}/{model}/{stage}/seed{N}``)."""

    model_dir: Path
    updates: int
    train_seconds: float
    threads: int
    test_output: Path


def read_ours(run: Path) -> OurRun:
    """Our run's summary and test output; its subword model must be joint (one model for both sides), so that
    the peer can share its embeddings as the recipe does."""
    summary_path, meta_path, test_output = (
        run / "model" / "summary.json",
        run / "model" / "meta.json",
        run / OUR_TEST_OUTPUT,
    )
    for path in (summary_path, meta_path, test_output):
        if not path.is_file():
            raise SystemExit(
                f"error: {path} not found (--ours takes a run such as results/en-de/transformer/baseline/seed1)"
            )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    subword = json.loads(meta_path.read_text(encoding="utf-8"))["subword"]
    if subword["src.model"]["sha256"] != subword["trg.model"]["sha256"]:
        raise SystemExit(f"error: {meta_path}: source and target subword models differ; the recipe needs a joint one")
    return OurRun(run / "model", summary["steps"], summary["train_seconds"], summary["threads"], test_output)


def score(hyps: list[str], refs: list[str], tok_refs: list[str]) -> tuple[float, float]:
    """Cased sacreBLEU against the detokenized references, and BLEU (lc tok) against the official tokenized ones."""
    if len(hyps) != len(refs):
        raise CommandFailed(f"{len(hyps)} hypotheses for {len(refs)} references")
    return sacrebleu.corpus_bleu(hyps, [refs]).score, score_tokenized_bleu(hyps, tok_refs, "de")[0]


def tokenized_refs(work: Path, mirror: Path | None) -> dict[str, list[str]]:
    """The official lowercased, normalized, tokenized German references of val and test2016."""
    refs = {}
    for split, name in TOKENIZED_REFS.items():
        path = work / "download" / name
        if not path.exists():
            download(f"{MULTI30K_TOK}/{name}", path, mirror=mirror)
        refs[split] = path.read_text(encoding="utf-8").splitlines()
    return refs


def train_peer(fairseq: Fairseq, task: Task, threads: int, cpu_seconds: float, run_dir: Path) -> dict:
    """Train the recipe for ``cpu_seconds`` of update CPU time in ``run_dir`` (once) and decode dev and test."""
    recipe = replace(TRANSFORMER_TINY, setup=replace(TRANSFORMER_TINY.setup, threads=threads))
    if not (run_dir / CPU_REPORT).exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        print(f"fairseq transformer_tiny: training for {cpu_seconds / 60:.2f} CPU minutes in {run_dir}", flush=True)
        trained = run_measured(fairseq.train_for_cpu(task, recipe, cpu_seconds, run_dir), run_dir / "train.stdout.log")
        write_text(run_dir / "train.measured.json", json.dumps(asdict(trained)))
    trained = json.loads((run_dir / "train.measured.json").read_text(encoding="utf-8"))
    updates, spent = fairseq.cpu_budget(run_dir)
    hyps = {}
    for split in ("dev", "test"):
        out = run_dir / f"{split}.beam.out"
        print(
            f"fairseq transformer_tiny: {updates} updates, {spent / 60:.2f} CPU minutes; decoding {split}", flush=True
        )
        run_measured(
            fairseq.translate(task, recipe.setup, run_dir, BEAM_SIZE, out, split=split), run_dir / f"{split}.log"
        )
        hyps[split] = fairseq.hypotheses(task, out, split=split)
    return {"updates": updates, "update_cpu_seconds": spent, "process": trained, "hyps": hyps}


def decode_our_dev(ours: OurRun, task: Task, threads: int, run_dir: Path) -> list[str]:
    """Our model's beam-5 translation of val (the pipeline's defaults but the beam size, as its test decoding), kept
    under the digest of its weights: a run directory reused with another ``--ours`` decodes that model anew."""
    out = run_dir / f"ours.dev.{hash_file(ours.model_dir / 'model.pt')[:16]}.de"
    if not out.exists():
        print(f"ours: decoding dev with {ours.model_dir}", flush=True)
        argv = [sys.executable, "-m", "nmt", "translate", "--model", str(ours.model_dir), "--method", "beam"]
        argv += ["--beam-size", str(BEAM_SIZE), "--threads", str(threads), "--device", "cpu"]
        part = out.with_name(out.name + ".part")
        run_measured(
            Command(argv, env=thread_env(threads), stdin=task.raw("dev", "src"), stdout=part), run_dir / "ours.dev.log"
        )
        part.replace(out)
    return out.read_text(encoding="utf-8").splitlines()


def print_table(rows: list[Row]) -> str:
    header = ["system", "CPU minutes of training", "updates", "dev BLEU", "test2016 BLEU", "test2016 BLEU (lc tok)"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for r in rows:
        cells = [r.system, f"{r.cpu_minutes:.1f}", f"{r.updates:,}", f"{r.dev_bleu:.2f}", f"{r.test_bleu:.2f}"]
        lines.append("| " + " | ".join([*cells, f"{r.test_bleu_lc_tok:.2f}"]) + " |")
    table = "\n".join(lines)
    print("\n" + table)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--ours", type=Path, required=True, help="our run directory, e.g. results/en-de/transformer/baseline/seed1"
    )
    parser.add_argument("--cpu-minutes", type=float, help="the peer's budget (default: our run's train_seconds)")
    parser.add_argument("--threads", type=int, default=1, help="threads of every process (our default trains with 1)")
    parser.add_argument("--mirror", type=Path, help="wget -x mirror of the corpora (default: download)")
    parser.add_argument("--work", type=Path, default=Path("benchmarks/work"), help="venvs, data and runs")
    parser.add_argument("--name", help="the run directory's name (default: from the budget)")
    args = parser.parse_args()

    ours = read_ours(args.ours)
    cpu_seconds = 60 * args.cpu_minutes if args.cpu_minutes else ours.train_seconds
    if ours.threads != 1:
        print(f"warning: our run trained with {ours.threads} threads; its train_seconds are wall seconds", flush=True)
    work = args.work.resolve()
    task = prepare_multi30k(work / "data", args.mirror, dev_sentences=None, spm_model=ours.model_dir / "src.model")
    refs = {split: task.lines(split, "trg") for split in ("dev", "test")}
    tok_refs = tokenized_refs(work / "data", args.mirror)
    fairseq = Fairseq()
    fairseq.install(work / "venvs")
    run_dir = work / "runs" / "peer_recipe" / (args.name or f"cpu{cpu_seconds:.0f}s")

    peer = train_peer(fairseq, task, args.threads, cpu_seconds, run_dir)
    our_hyps = {"dev": decode_our_dev(ours, task, args.threads, run_dir)}
    our_hyps["test"] = ours.test_output.read_text(encoding="utf-8").splitlines()
    rows = []
    for system, minutes, updates, hyps in (
        ("ours: Transformer (config.yaml)", ours.train_seconds / 60, ours.updates, our_hyps),
        ("fairseq transformer_tiny (Wu et al. 2021)", peer["update_cpu_seconds"] / 60, peer["updates"], peer["hyps"]),
    ):
        (dev, dev_tok), (test, test_tok) = (score(hyps[s], refs[s], tok_refs[s]) for s in ("dev", "test"))
        rows.append(Row(system, minutes, updates, dev, dev_tok, test, test_tok))
    table = print_table(rows)
    results = {
        "rows": [asdict(r) for r in rows],
        "table": table,
        "budget_cpu_seconds": cpu_seconds,
        "budget_from": "--cpu-minutes" if args.cpu_minutes else f"{args.ours}/model/summary.json train_seconds",
        "peer_process": peer["process"],
        "ours": str(args.ours),
        "threads": args.threads,
        "cpu": cpu_model(),
        "commit": code_commit(),
        "command": shlex.join(["python", *sys.argv]),
    }
    write_text(run_dir / "results.json", json.dumps(results, indent=2) + "\n")
    print(
        f"\nours: wall minutes of its updates at {ours.threads} thread(s) (summary.json train_seconds); the peer: CPU"
    )
    print(
        f"minutes of its updates (whole process: {peer['process']['cpu_seconds'] / 60:.1f}). {run_dir / 'results.json'}"
    )


if __name__ == "__main__":
    try:
        main()
    except CommandFailed as e:
        sys.exit(f"error: {e}")
