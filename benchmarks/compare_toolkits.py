"""Training and decoding speed of our pipeline against Joey NMT 2.3.0, OpenNMT-py 3.5.1 and fairseq 0.12; prints tables.

    python benchmarks/compare_toolkits.py --mirror ../shared/data/mirror --repeats 3 --budget-minutes 10 \
        [--size small] [--updates N] [--systems ours ours-bf16 joeynmt opennmt fairseq ctranslate2]

Every system trains the same Transformer in fp32 (``--size tiny``, the default: 2+2 layers, d_model 128;
``--size small``: the default model and batch of ``config.yaml``; the sizes, batches and schedules are
``Setup`` and ``SIZES`` in ``toolkits/task.py``) on the same sentencepiece pieces of Multi30k en->de
(or of a tiny synthetic task, ``--task synthetic``), on the CPU with the same number of threads.
``ours-bf16`` is an extra row: ours with ``bf16: on`` (bfloat16 autocast in training, bfloat16 weights in
decoding). The peers are installed into their own virtual environments under ``--work`` the first time
(torch pinned to 2.13.0; fairseq builds from source for a few minutes). The systems run one after the
other, in a rotated order in each repeat, and the harness itself measures every process: wall time and
peak RSS. ``ctranslate2`` is a decoding peer (``toolkits/ct2.py``), in tables of its own:

- equal work: after each ``ours`` run, our model is exported (``nmt export``) and CTranslate2 (float32, int8)
  decodes the test set with the searches that both implement alike, greedy and beam 5 without length
  normalisation (alpha 0), as our torch decoding does again; each output is compared line by line with
  ours of the same search (the share of identical lines is printed);
- with ``opennmt``, OpenNMT-py's checkpoint of each repeat, converted, decodes with beam 5 and alpha 1: a
  different model (and length penalty), so its times are not ours' work.

Figures per system (medians over the repeats):

- train tok/s: target tokens (EOS included, padding excluded) per second of training updates,
  validation excluded, read from each toolkit's own log and converted to that definition;
- train wall: seconds of the whole ``train`` process for ``--updates`` updates (start-up, data
  loading, one validation at the end and the checkpoint included);
- beam/greedy decode: seconds of the whole ``translate`` process for the test set (1,000 sentences
  of test_2016_flickr), batches of 64 sentences, beam 5 with length penalty alpha 1 (ours' greedy time
  is that of the equal-work greedy decode when ``ctranslate2`` runs: the same search, decoded once);
- BLEU (sacreBLEU, detokenized) of the beam-5 output after ``--updates`` updates, and after the
  same wall-clock budget: each system trains for as many updates as fit in ``--budget-minutes``
  at its own measured seconds per update.

Raw measurements go to ``<work>/runs/<task>/<name>/results.json`` (``<task>-<size>`` for sizes other
than tiny), next to every run's logs, configs and hypotheses, written after every run: the same command
with the same ``--name`` resumes an interrupted comparison. Ratios are ours/peer (above 1: ours is faster).
"""

import argparse
import json
import shutil
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import sacrebleu
from gemm_peak import fp32_gemm_peak
from toolkits.command import CommandFailed, Toolkit, run_measured
from toolkits.ct2 import COMPUTE_TYPES, CTranslate2
from toolkits.fairseq import Fairseq
from toolkits.joeynmt import JoeyNMT
from toolkits.opennmt import OpenNMT, final_checkpoint
from toolkits.ours import Ours
from toolkits.task import SIZES, Setup, Task, prepare_multi30k, prepare_synthetic, setup_of_size

from nmt.atomic import write_text

# --updates by --size: small's 300 updates keep 3 repeats of every system, with a 10-minute budget, near
# 2 hours on 2 CPU cores (issue 19, measured on the AMD EPYC machine of benchmarks/README.md).
DEFAULT_UPDATES = {"tiny": 1000, "small": 300}
TRAINING_SYSTEMS = ["ours", "ours-bf16", "joeynmt", "opennmt", "fairseq"]

PARAMETERS_FP32_FLOPS = 6  # forward + backward FLOPs per parameter and target token


@dataclass
class Run:
    """One training run and the decoding of the test set with its model."""

    system: str
    repeat: int
    updates: int
    train_seconds: float
    train_rss_mb: float
    train_tokens: int
    update_seconds: float
    beam_seconds: float
    greedy_seconds: float | None
    decode_rss_mb: float
    bleu: float

    @property
    def tokens_per_second(self) -> float:
        return self.train_tokens / self.update_seconds


@dataclass
class DecodeRun:
    """A decoding peer's conversion of one training run's model and its decoding of the test set."""

    system: str
    repeat: int
    trained_by: str
    convert_seconds: float
    beam_seconds: float
    greedy_seconds: float | None
    decode_rss_mb: float
    bleu: float


def bleu(task: Task, hyps: list[str]) -> float:
    refs = task.lines("test", "trg")
    if len(hyps) != len(refs):
        raise CommandFailed(f"{len(hyps)} hypotheses for {len(refs)} test sentences")
    return sacrebleu.corpus_bleu(hyps, [refs]).score


def train_and_decode(
    toolkit: Toolkit, task: Task, setup: Setup, updates: int, run_dir: Path, repeat: int, greedy: bool
) -> Run:
    """Train ``toolkit`` for ``updates`` updates in a fresh ``run_dir``, then decode the test set."""
    run_dir.mkdir(parents=True)  # fresh(): a resumed comparison removed what an interrupted run left
    print(f"  {toolkit.name}: training {updates} updates in {run_dir}", flush=True)
    trained = run_measured(toolkit.train(task, setup, updates, run_dir), run_dir / "train.stdout.log")
    tokens, update_seconds = toolkit.throughput(run_dir)
    print(f"  {toolkit.name}: {trained.seconds:.0f} s, {tokens / update_seconds:.0f} tok/s; decoding", flush=True)
    beam = run_measured(
        toolkit.translate(task, setup, run_dir, setup.beam_size, run_dir / "test.beam.out"),
        run_dir / "translate.beam.log",
    )
    score = bleu(task, toolkit.hypotheses(task, run_dir / "test.beam.out"))
    greedy_seconds = None
    if greedy:
        greedy_seconds = run_measured(
            toolkit.translate(task, setup, run_dir, 1, run_dir / "test.greedy.out"), run_dir / "translate.greedy.log"
        ).seconds
        bleu(task, toolkit.hypotheses(task, run_dir / "test.greedy.out"))  # checks the line count
    return Run(
        toolkit.name,
        repeat,
        updates,
        trained.seconds,
        trained.peak_rss_mb,
        tokens,
        update_seconds,
        beam.seconds,
        greedy_seconds,
        beam.peak_rss_mb,
        score,
    )


def convert_and_decode(
    decoders: list[CTranslate2], task: Task, setup: Setup, onmt_run: Path, repeat: int, greedy: bool
) -> list[DecodeRun]:
    """Convert the OpenNMT-py checkpoint of ``onmt_run`` for CTranslate2 once; decode with each compute type."""
    model = onmt_run / "ct2-model"
    converted = run_measured(CTranslate2.convert(final_checkpoint(onmt_run), model), onmt_run / "ct2-convert.log")
    runs = []
    for decoder in decoders:
        print(f"  {decoder.name}: decoding with the model of {onmt_run.name}", flush=True)
        out = onmt_run / f"test.beam.{decoder.name}.out"
        beam = run_measured(
            decoder.translate(task, setup, model, setup.beam_size, out), onmt_run / f"{decoder.name}.beam.log"
        )
        score, rss = bleu(task, decoder.hypotheses(task, out)), beam.peak_rss_mb
        greedy_seconds = None
        if greedy:
            out = onmt_run / f"test.greedy.{decoder.name}.out"
            log = onmt_run / f"{decoder.name}.greedy.log"
            greedy_seconds = run_measured(decoder.translate(task, setup, model, 1, out), log).seconds
            bleu(task, decoder.hypotheses(task, out))  # checks the line count
        runs.append(
            DecodeRun(decoder.name, repeat, "opennmt", converted.seconds, beam.seconds, greedy_seconds, rss, score)
        )
    return runs


# The searches that ours and CTranslate2 implement alike: name -> beam size, at length penalty alpha 0 (CTranslate2
# divides by length ** alpha, ours by GNMT's ((5 + length) / 6) ** alpha: equal only at alpha 0).
EQUAL_SEARCHES = {"greedy": 1, "beam5-alpha0": 5}


@dataclass
class EqualRun:
    """One decoding of the test set by ours (torch fp32) or CTranslate2 with our model of one repeat.

    ``identical``: the share of output lines equal to ours' with the same search and model.
    """

    system: str
    repeat: int
    search: str
    convert_seconds: float
    seconds: float
    rss_mb: float
    bleu: float
    identical: float


def decode_equal_work(
    ours: Toolkit, decoders: list[CTranslate2], task: Task, setup: Setup, run_dir: Path, repeat: int
) -> list[EqualRun]:
    """Export our model of ``run_dir`` and decode the test set with ours and each decoder, search by search."""
    export = run_dir / "ct2-ours"
    converted = run_measured(CTranslate2.export_ours(run_dir / "model", export), run_dir / "ct2-export.log")
    equal = replace(setup, alpha=0.0)
    runs = []
    for search, beam_size in EQUAL_SEARCHES.items():
        print(f"  equal work, {search}: ours and {', '.join(d.name for d in decoders)}", flush=True)
        out = run_dir / f"test.{search}.ours.out"
        mine = run_measured(ours.translate(task, equal, run_dir, beam_size, out), run_dir / f"ours.{search}.log")
        reference = ours.hypotheses(task, out)
        runs.append(EqualRun("ours", repeat, search, 0.0, mine.seconds, mine.peak_rss_mb, bleu(task, reference), 1.0))
        for decoder in decoders:
            out = run_dir / f"test.{search}.{decoder.name}.out"
            log = run_dir / f"{decoder.name}.{search}.log"
            theirs = run_measured(decoder.translate(task, equal, export, beam_size, out, ours=True), log)
            hyps = decoder.hypotheses(task, out)
            same = sum(h == r for h, r in zip(hyps, reference, strict=True)) / len(reference)
            runs.append(
                EqualRun(decoder.name, repeat, search, converted.seconds, theirs.seconds, theirs.peak_rss_mb,
                         bleu(task, hyps), same)
            )  # fmt: skip
    return runs


BUDGET_REPEAT = -1  # the repeat number of a budget run in results.json


class Results:
    """``results.json`` of a comparison, written after every run, so that the same command resumes it.

    Runs already in the file (same system, repeat and updates) are not run again; a run directory
    left by an interrupted run is removed and its run done again.
    """

    def __init__(self, path: Path, task: str, setup: dict) -> None:
        self.path, self.task, self.setup = path, task, json.loads(json.dumps(setup))  # tuples as lists
        self.runs: list[Run] = []
        self.decode_runs: list[DecodeRun] = []
        self.equal_runs: list[EqualRun] = []
        if path.exists():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved["setup"] != self.setup:
                raise SystemExit(f"error: {path} is of another setup; pick another --name")
            self.runs = [Run(**r) for r in saved["runs"]]
            self.decode_runs = [DecodeRun(**r) for r in saved["decode_runs"]]
            self.equal_runs = [EqualRun(**r) for r in saved.get("equal_runs", [])]
            print(f"resuming {path}: {len(self.runs)} runs done", flush=True)

    def has(self, system: str, repeat: int, updates: int) -> bool:
        return any((r.system, r.repeat, r.updates) == (system, repeat, updates) for r in self.runs)

    def add(self, runs: list[Run], decode_runs: list[DecodeRun], equal_runs: list[EqualRun] = ()) -> None:
        self.runs += runs
        self.decode_runs += decode_runs
        redone = {(r.system, r.repeat, r.search) for r in equal_runs}  # a run done again replaces its decodes
        self.equal_runs = [r for r in self.equal_runs if (r.system, r.repeat, r.search) not in redone]
        self.equal_runs += equal_runs
        results = {
            "task": self.task,
            "setup": self.setup,
            "runs": [asdict(r) for r in self.runs],
            "decode_runs": [asdict(r) for r in self.decode_runs],
            "equal_runs": [asdict(r) for r in self.equal_runs],
        }
        write_text(self.path, json.dumps(results, indent=2))


def repeat_of(run: Run) -> int:
    return run.repeat


def fresh(run_dir: Path) -> Path:
    """``run_dir``, emptied of what an interrupted run left."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    return run_dir


def median(runs: list[Run], key) -> float:
    return statistics.median(key(r) for r in runs)


def print_tables(
    runs: list[Run],
    budget_runs: list[Run],
    systems: list[str],
    updates: int,
    peak_gflops: float,
    parameters: int | None,
) -> None:
    by_system = {s: [r for r in runs if r.system == s] for s in systems}
    budget = {r.system: r for r in budget_runs}
    print(f"\nMedians of {len(by_system[systems[0]])} repeat(s); {updates} updates; decode: test set, batch 64.\n")
    header = [
        "system",
        "train tok/s",
        f"train wall s ({updates} upd)",
        "train peak RSS MiB",
        "beam5 decode s",
        "greedy decode s",
        "decode peak RSS MiB",
        f"BLEU @{updates} upd",
    ]
    if budget:
        header += ["updates in budget", "wall s", "BLEU @budget"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for system, rs in by_system.items():
        greedy = [r.greedy_seconds for r in rs if r.greedy_seconds is not None]
        cells = [
            system,
            f"{median(rs, lambda r: r.tokens_per_second):.0f}",
            f"{median(rs, lambda r: r.train_seconds):.1f}",
            f"{median(rs, lambda r: r.train_rss_mb):.0f}",
            f"{median(rs, lambda r: r.beam_seconds):.1f}",
            f"{statistics.median(greedy):.1f}" if greedy else "-",
            f"{median(rs, lambda r: r.decode_rss_mb):.0f}",
            f"{median(rs, lambda r: r.bleu):.2f}",
        ]
        if budget:
            b = budget.get(system)
            cells += [str(b.updates), f"{b.train_seconds:.0f}", f"{b.bleu:.2f}"] if b else ["-"] * 3
        print("| " + " | ".join(cells) + " |")
    if "ours" not in by_system:
        return
    ours = by_system["ours"]
    if parameters:
        rate = median(ours, lambda r: r.tokens_per_second)
        share = PARAMETERS_FP32_FLOPS * parameters * rate / 1e9 / peak_gflops
        print(
            f"\nours: {parameters:,} parameters; {rate:.0f} tok/s x 6 x parameters = "
            f"{share * peak_gflops:.1f} GFLOP/s, {100 * share:.0f}% of the machine's fp32 GEMM peak "
            f"({peak_gflops:.0f} GFLOP/s, benchmarks/gemm_peak.py)"
        )
    peers = [s for s in systems if not s.startswith("ours")]
    if not peers:
        return
    print("\nRatios ours/peer, median over repeats of the ratio within a repeat (above 1: ours is better).\n")
    print(
        "| ours | peer | train tok/s | train wall | beam5 decode speed | greedy decode speed | BLEU @updates (diff) "
        "| BLEU @budget (diff) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for mine in [s for s in systems if s.startswith("ours")]:
        for peer in peers:
            print_ratios(mine, peer, by_system, budget)


def print_ratios(mine: str, peer: str, by_system: dict[str, list[Run]], budget: dict[str, Run]) -> None:
    """One row of ratios of our system ``mine`` (ours or ours-bf16) to ``peer``, paired by repeat."""
    pairs = list(zip(by_system[mine], by_system[peer], strict=False))

    def ratio(key) -> str:
        values = [key(o, p) for o, p in pairs if key(o, p) is not None]
        return f"{statistics.median(values):.2f}x" if values else "-"

    def greedy(o: Run, p: Run) -> float | None:
        return p.greedy_seconds / o.greedy_seconds if o.greedy_seconds and p.greedy_seconds else None

    bleu_diff = median(by_system[mine], lambda r: r.bleu) - median(by_system[peer], lambda r: r.bleu)
    budget_diff = f"{budget[mine].bleu - budget[peer].bleu:+.2f}" if mine in budget and peer in budget else "-"
    cells = [
        mine,
        peer,
        ratio(lambda o, p: o.tokens_per_second / p.tokens_per_second),
        ratio(lambda o, p: p.train_seconds / o.train_seconds),
        ratio(lambda o, p: p.beam_seconds / o.beam_seconds),
        ratio(greedy),
        f"{bleu_diff:+.2f}",
        budget_diff,
    ]
    print("| " + " | ".join(cells) + " |")


def print_equal_work_table(equal_runs: list[EqualRun]) -> None:
    """Medians per search and system on our model, with ratios to ours within each repeat."""
    print("\nEqual work: our model of each repeat, decoded by ours (torch fp32) and by CTranslate2 from its export,")
    print("whole processes; ratios are medians over repeats of the ratio within a repeat (time: ours/system, above 1:")
    print("the system is faster; RSS: system/ours).\n")
    header = ["search", "system", "export s", "decode s", "peak RSS MiB", "BLEU", "identical to ours"]
    print("| " + " | ".join([*header, "speed vs ours", "RSS vs ours"]) + " |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for search in EQUAL_SEARCHES:
        ours = {r.repeat: r for r in equal_runs if (r.system, r.search) == ("ours", search)}
        for system in dict.fromkeys(r.system for r in equal_runs):
            rs = [r for r in equal_runs if (r.system, r.search) == (system, search)]
            if not rs:
                continue
            paired = [(ours[r.repeat], r) for r in rs if r.repeat in ours]
            cells = [
                search,
                system,
                f"{statistics.median(r.convert_seconds for r in rs):.1f}" if system != "ours" else "-",
                f"{statistics.median(r.seconds for r in rs):.1f}",
                f"{statistics.median(r.rss_mb for r in rs):.0f}",
                f"{statistics.median(r.bleu for r in rs):.2f}",
                f"{100 * statistics.median(r.identical for r in rs):.1f}%",
                f"{statistics.median(o.seconds / r.seconds for o, r in paired):.2f}x",
                f"{statistics.median(r.rss_mb / o.rss_mb for o, r in paired):.2f}x",
            ]
            print("| " + " | ".join(cells) + " |")


def print_decode_table(decode_runs: list[DecodeRun], runs: list[Run]) -> None:
    """Medians per decoding peer, and its beam-5 speed against OpenNMT-py's (same model) and ours."""
    systems = list(dict.fromkeys(r.system for r in decode_runs))
    print("\nCTranslate2 on OpenNMT-py's model of each repeat, converted: a different model from ours, so 'vs ours'")
    print("compares different work. Speed ratios: peer/other, above 1: the peer is faster; median over repeats of the")
    print("ratio within a repeat.\n")
    header = ["system", "convert s", "beam5 decode s", "greedy decode s", "decode peak RSS MiB", "BLEU"]
    print("| " + " | ".join([*header, "vs opennmt", "vs ours", "vs ours-bf16"]) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for system in systems:
        rs = [r for r in decode_runs if r.system == system]
        greedy = [r.greedy_seconds for r in rs if r.greedy_seconds is not None]

        def speedup(other: str, rs=rs) -> str:
            by_repeat = {r.repeat: r.beam_seconds for r in runs if r.system == other}
            values = [by_repeat[r.repeat] / r.beam_seconds for r in rs if r.repeat in by_repeat]
            return f"{statistics.median(values):.2f}x" if values else "-"

        cells = [
            system,
            f"{statistics.median(r.convert_seconds for r in rs):.1f}",
            f"{statistics.median(r.beam_seconds for r in rs):.1f}",
            f"{statistics.median(greedy):.1f}" if greedy else "-",
            f"{statistics.median(r.decode_rss_mb for r in rs):.0f}",
            f"{statistics.median(r.bleu for r in rs):.2f}",
            speedup("opennmt"),
            speedup("ours"),
            speedup("ours-bf16"),
        ]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="multi30k", choices=["multi30k", "synthetic"])
    parser.add_argument("--mirror", type=Path, help="wget -x mirror of the corpora (default: download)")
    parser.add_argument("--work", type=Path, default=Path("benchmarks/work"), help="venvs, data and runs")
    parser.add_argument(
        "--systems",
        nargs="+",
        default=[*TRAINING_SYSTEMS, "ctranslate2"],
        choices=[*TRAINING_SYSTEMS, "ctranslate2"],
        help="default: all; ours-bf16 (ours with bf16: on) needs ours; ctranslate2 (decoding only) needs ours",
    )
    parser.add_argument("--size", default="tiny", choices=list(SIZES), help="the model and batch of every system")
    parser.add_argument("--updates", type=int, help="updates per training run (default: 1000 tiny, 300 small)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-minutes", type=float, default=0.0, help="also compare BLEU at this wall clock")
    parser.add_argument("--no-greedy", action="store_true", help="skip the greedy decoding")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peak-gflops", type=float, help="the machine's fp32 GEMM peak (default: measured)")
    parser.add_argument("--name", default="", help="a label for the run directories (default: a counter)")
    args = parser.parse_args()

    if "ours-bf16" in args.systems and "ours" not in args.systems:
        parser.error("--systems: ours-bf16 is an extra row next to ours (fp32); add ours")
    if "ctranslate2" in args.systems and "ours" not in args.systems:
        parser.error("--systems: ctranslate2 decodes with our model of each repeat (and OpenNMT-py's); add ours")
    if args.updates is None:
        args.updates = DEFAULT_UPDATES[args.size]
    work = args.work.resolve()
    setup = setup_of_size(args.size, args.threads)
    task = (
        prepare_synthetic(work / "data") if args.task == "synthetic" else prepare_multi30k(work / "data", args.mirror)
    )
    toolkits: dict[str, Toolkit] = {
        "ours": Ours("off"),
        "ours-bf16": Ours("on"),
        "joeynmt": JoeyNMT(),
        "opennmt": OpenNMT(),
        "fairseq": Fairseq(),
    }
    systems = [s for s in toolkits if s in args.systems]
    for system in systems:
        toolkits[system].install(work / "venvs")
    decoders = [CTranslate2(c) for c in COMPUTE_TYPES] if "ctranslate2" in args.systems else []
    runs_root = work / "runs" / (task.name if args.size == "tiny" else f"{task.name}-{args.size}")
    name = args.name or str(sum(1 for _ in runs_root.glob("*")) + 1 if runs_root.exists() else 1)
    runs_root = runs_root / name
    print(f"{task.name}, size {args.size}: runs in {runs_root}", flush=True)

    results = Results(runs_root / "results.json", task.name, asdict(setup))
    for repeat in range(args.repeats):
        order = systems[repeat % len(systems) :] + systems[: repeat % len(systems)]
        print(f"repeat {repeat + 1}/{args.repeats}: {' '.join(order)}", flush=True)
        for system in order:
            if results.has(system, repeat, args.updates):
                continue
            run_dir = fresh(runs_root / f"{system}-u{args.updates}-r{repeat + 1}")
            equal_work = system == "ours" and bool(decoders)  # which decodes greedy anyway: the same search
            greedy = not args.no_greedy
            run = train_and_decode(
                toolkits[system], task, setup, args.updates, run_dir, repeat, greedy and not equal_work
            )
            decoded, equal = [], []
            if system == "opennmt" and decoders:
                decoded = convert_and_decode(decoders, task, setup, run_dir, repeat, greedy=greedy)
            if equal_work:
                equal = decode_equal_work(toolkits[system], decoders, task, setup, run_dir, repeat)
                if greedy:
                    run = replace(
                        run, greedy_seconds=next(e.seconds for e in equal if (e.system, e.search) == ("ours", "greedy"))
                    )
            results.add([run], decoded, equal)
    runs = sorted(
        (r for r in results.runs if 0 <= r.repeat < args.repeats and r.updates == args.updates), key=repeat_of
    )
    budget_runs = []
    if args.budget_minutes > 0:
        for system in systems:
            per_update = median([r for r in runs if r.system == system], lambda r: r.train_seconds) / args.updates
            updates = max(1, int(args.budget_minutes * 60 / per_update))
            print(f"budget {args.budget_minutes} min: {system} gets {updates} updates", flush=True)
            if not results.has(system, BUDGET_REPEAT, updates):
                run_dir = fresh(runs_root / f"{system}-budget{args.budget_minutes:g}min")
                run = train_and_decode(toolkits[system], task, setup, updates, run_dir, BUDGET_REPEAT, greedy=False)
                results.add([run], [])
            budget_runs += [
                r for r in results.runs if (r.system, r.repeat, r.updates) == (system, BUDGET_REPEAT, updates)
            ]
    parameters = _our_parameters(runs_root, runs)
    peak = args.peak_gflops or fp32_gemm_peak(args.threads)
    print_tables(runs, budget_runs, systems, args.updates, peak, parameters)
    repeats = {r.repeat for r in runs}
    equal_runs = [r for r in results.equal_runs if r.repeat in repeats]
    if equal_runs:
        print_equal_work_table(equal_runs)
    decode_runs = [r for r in results.decode_runs if r.repeat in repeats]
    if decode_runs:
        print_decode_table(decode_runs, runs)


def _our_parameters(runs_root: Path, runs: list[Run]) -> int | None:
    ours = [r for r in runs if r.system == "ours"]
    if not ours:
        return None
    summary = runs_root / f"ours-u{ours[0].updates}-r1" / "model" / "summary.json"
    return json.loads(summary.read_text(encoding="utf-8"))["parameters"]


if __name__ == "__main__":
    try:
        main()
    except CommandFailed as e:
        sys.exit(f"error: {e}")
