"""fairseq 0.12 adapter (the ``fairseq-fixed`` 0.12.3.1 release, which runs on Python 3.11): the benchmark's
Transformer, binarized with fairseq-preprocess, trained with fairseq-train and decoded with fairseq-generate on CPU;
and a published recipe of fairseq's own (``TRANSFORMER_TINY``) trained for a budget of CPU time (peer_recipe.py).

fairseq 0.12.2 itself does not import on Python 3.11: ``fairseq/dataclass/configs.py`` gives dataclass
fields dataclass instances as defaults (``common: CommonConfig = CommonConfig()``), which Python 3.11
rejects ("mutable default ... use default_factory"). fairseq-fixed 0.12.3.1 is 0.12.2 with that fixed
(hydra-core 1.3.2, omegaconf 2.3.0); it is built from its sdist here against our torch. Its pieces and
dictionary are the task's (``task.vocab``; fairseq puts <s> <pad> </s> <unk> first), so the vocabulary
size equals ours. Behaviour below was read in the sdist (``fairseq/...`` paths are relative to it).

Known differences from our setup that no option removes:

- Update k runs at the learning rate of step k - 1, the first at ``warmup_init_lr`` 0
  (``optim/lr_scheduler/inverse_square_root_schedule.py``: the rate is set after each update).
- Sinusoidal positions put sines in the first half of the dimensions and cosines in the second
  (``modules/sinusoidal_positional_embedding.py``), ours interleave them: a fixed permutation.
- The length penalty divides a finished hypothesis's score by ``length ** lenpen``
  (``sequence_generator.py``), not GNMT's ``((5 + length) / 6) ** alpha``.
"""

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from toolkits.command import Command, install_venv, log_time, report_every, thread_env
from toolkits.task import Setup, Task

VERSION = "0.12.3.1"
# What fairseq-fixed's setup.py requires but torch and torchaudio (used by the speech tasks only, and no
# release of it matches torch 2.13.0), installed after it (which is installed with --no-deps).
RUNTIME_DEPS = [
    "cffi", "cython", "hydra-core==1.3.2", "omegaconf==2.3.0", "numpy", "regex", "sacrebleu", "tqdm",
    "bitarray", "scikit-learn", "packaging",
]  # fmt: skip
# Its setup.py builds Cython and C++ extensions and imports torch: build it in the venv (which has torch).
BUILD_DEPS = ["cython", "numpy", "setuptools", "wheel"]

TRAIN_LOG = "fairseq-train.log"
CPU_REPORT = "cpu_budget.json"  # written by fairseq_train.py --cpu-clock: updates and their CPU seconds
# fairseq-train with millisecond log time stamps (and optionally a CPU-time clock), in fairseq's environment.
TRAIN_MAIN = Path(__file__).with_name("fairseq_train.py")
SUBSETS = {"dev": "valid", "test": "test"}  # fairseq-preprocess's names of the splits
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \| INFO \| "
# fairseq_cli/train.py (``train``) logs "Start iterating over samples" before each epoch's loop, and every
# log_interval updates a report of the updates since the previous one (``logging/progress_bar.py``,
# SimpleProgressBar: "epoch 001:     20 / 45 loss=..., wpb=<mean target tokens per batch>, ...,
# num_updates=20, ..."), before validation and saving.
START = re.compile(STAMP + r"fairseq_cli\.train \| Start iterating over samples", re.MULTILINE)
REPORT = re.compile(STAMP + r".*?epoch \d+:\s+\d+ / \d+ .*?\bwpb=([\d.]+),.*?\bnum_updates=(\d+)", re.MULTILINE)
HYPOTHESIS = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Recipe:
    """A fairseq architecture by name with every size it sets stated, and the training of ``setup``.

    The sizes are passed to fairseq-train as well, so the model is the one stated here whatever the
    architecture's defaults; ``setup`` gives sizes, dropout, optimisation, batches, threads and decoding.
    """

    arch: str
    setup: Setup
    pre_norm: bool
    attention_dropout: float
    activation_dropout: float

    @classmethod
    def of(cls, setup: Setup) -> "Recipe":
        """The benchmark's own model: pre-norm, and (as ours) dropout after the embeddings, on attention weights,
        on the FFN activation and after each sublayer."""
        return cls(
            "transformer", setup, pre_norm=True, attention_dropout=setup.dropout, activation_dropout=setup.dropout
        )


# fairseq's transformer_tiny as fairseq 0.12 defines it (fairseq/models/transformer/transformer_legacy.py:
# tiny_architecture, then base_architecture): 2 + 2 post-norm layers, embeddings 64, FFN 64, 2 heads, ReLU, no
# attention or activation dropout, sinusoidal positions. Trained as the text-only Multi30k baseline of Wu et al.
# (2021) (github.com/LividWo/Revisit-MMT, README-baseline.md): all embeddings shared, dropout 0.3, lr 0.005 after
# 2,000 warm-up updates then the inverse square root, max_tokens 4,096 (on 2 GPUs there, so about 8k tokens per
# update; 4,096 on the one process here), label smoothing 0.1, Adam (0.9, 0.98); eps, no clipping and no weight
# decay are fairseq's defaults, beam 5 with fairseq's lenpen 1.
TRANSFORMER_TINY = Recipe(
    "transformer_tiny",
    Setup(
        size="transformer_tiny", enc_layers=2, dec_layers=2, d_model=64, heads=2, ff_dim=64, dropout=0.3,
        label_smoothing=0.1, lr=0.005, warmup=2000, adam_betas=(0.9, 0.98), adam_eps=1e-8, clip_norm=0.0,
        batch_tokens=4096, beam_size=5, alpha=1.0, threads=1,
    ),
    pre_norm=False,
    attention_dropout=0.0,
    activation_dropout=0.0,
)  # fmt: skip


class Fairseq:
    name = "fairseq"

    def __init__(self) -> None:
        self.venv: Path | None = None  # set by install()

    def install(self, venvs: Path) -> None:
        """Create (or complete) ``venvs/fairseq``: fairseq-fixed built against our CPU torch (once)."""
        self.venv = venvs / self.name
        install_venv(
            self.venv,
            "import fairseq_cli.train, fairseq_cli.generate, fairseq_cli.preprocess",
            BUILD_DEPS,
            ["--no-build-isolation", "--no-deps", f"fairseq-fixed=={VERSION}"],
            RUNTIME_DEPS,
        )

    def train(self, task: Task, setup: Setup, updates: int, run_dir: Path) -> Command:
        """Binarize the piece files (fairseq-preprocess) and train; both in the one measured process."""
        return self._train(task, Recipe.of(setup), run_dir, ["--max-update", str(updates)], report_every(updates))

    def train_for_cpu(self, task: Task, recipe: Recipe, cpu_seconds: float, run_dir: Path) -> Command:
        """Binarize and train ``recipe`` until the update that spends ``cpu_seconds`` of CPU time in updates
        (``fairseq_train.py --cpu-clock``; :meth:`cpu_budget` reads what it spent)."""
        stop = ["--stop-time-hours", repr(cpu_seconds / 3600)]
        return self._train(task, recipe, run_dir, stop, 100, cpu_report=run_dir / CPU_REPORT)

    def cpu_budget(self, run_dir: Path) -> tuple[int, float]:
        """The updates of a :meth:`train_for_cpu` run and the CPU seconds from the first update's start to the
        last one's end."""
        report = json.loads((run_dir / CPU_REPORT).read_text(encoding="utf-8"))
        return report["updates"], report["update_cpu_seconds"]

    def _train(
        self,
        task: Task,
        recipe: Recipe,
        run_dir: Path,
        stop: list[str],
        log_every: int,
        cpu_report: Path | None = None,
    ) -> Command:
        data_dir = run_dir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev", "test"):
            for side, lang in (("src", task.src_lang), ("trg", task.trg_lang)):
                link = data_dir / f"{split}.{lang}"
                link.unlink(missing_ok=True)
                link.symlink_to(task.pieces(split, side).resolve())
        vocab = task.vocab.read_text(encoding="utf-8").splitlines()
        (run_dir / "dict.txt").write_text("".join(f"{piece} 1\n" for piece in vocab), encoding="utf-8")
        preprocess = [self._bin("fairseq-preprocess"), "--source-lang", task.src_lang, "--target-lang", task.trg_lang]
        preprocess += ["--trainpref", str(data_dir / "train"), "--validpref", str(data_dir / "dev")]
        preprocess += ["--testpref", str(data_dir / "test"), "--destdir", str(run_dir / "bin")]
        preprocess += ["--srcdict", str(run_dir / "dict.txt"), "--joined-dictionary", "--workers", "1"]
        clock = ["--cpu-clock", str(cpu_report)] if cpu_report else []
        # -P: the script's folder (this one, with fairseq.py) is not put on sys.path, where it would hide fairseq.
        train = [
            self._bin("python"),
            "-P",
            str(TRAIN_MAIN),
            *clock,
            str(run_dir / "bin"),
            *_train_options(recipe),
            *stop,
        ]
        train += ["--save-dir", str(run_dir / "checkpoints"), "--log-interval", str(log_every)]
        script = f"{shlex.join(preprocess)} && {shlex.join(train)} 2>&1 | tee {shlex.quote(str(run_dir / TRAIN_LOG))}"
        return Command(["bash", "-o", "pipefail", "-c", script], env=_env(recipe.setup))

    def throughput(self, run_dir: Path) -> tuple[int, float]:
        """Target tokens (``wpb`` x updates of each report: EOS included, padding excluded, ``ntokens`` of
        ``data/language_pair_dataset.py``) and the seconds from the first epoch's loop to the last report."""
        log = (run_dir / TRAIN_LOG).read_text(encoding="utf-8")
        start = START.search(log)
        reports = REPORT.findall(log)
        if start is None or not reports:
            raise ValueError(f"no training reports in {run_dir / TRAIN_LOG}")
        tokens, last = 0.0, 0
        for _, per_batch, step in reports:
            tokens += float(per_batch) * (int(step) - last)
            last = int(step)
        return round(tokens), (log_time(reports[-1][0]) - log_time(start.group(1))).total_seconds()

    def translate(
        self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path, split: str = "test"
    ) -> Command:
        """fairseq-generate on the binarized ``split`` (test, dev) with the last checkpoint; its report goes to
        ``out``."""
        argv = [
            self._bin("fairseq-generate"), str(run_dir / "bin"),
            "--path", str(run_dir / "checkpoints" / "checkpoint_last.pt"),
            "--gen-subset", SUBSETS[split], "--cpu", "--num-workers", "0",
            "--beam", str(beam_size), "--nbest", "1", "--lenpen", str(setup.alpha),
            "--batch-size", str(setup.decode_batch), "--required-batch-size-multiple", "1",
            # max length a x source (with EOS) + b, as ours.
            "--max-len-a", "1.5", "--max-len-b", "10",
        ]  # fmt: skip
        return Command(argv, env=_env(setup), stdout=out)

    def hypotheses(self, task: Task, out: Path, split: str = "test") -> list[str]:
        """The ``H-<id>`` lines of fairseq-generate's report, in the order of ``split``, decoded from pieces to text."""
        found = {int(i): hyp for i, hyp in HYPOTHESIS.findall(out.read_text(encoding="utf-8"))}
        expected = len(task.lines(split, "src"))
        if sorted(found) != list(range(expected)):
            raise ValueError(f"{out} has hypotheses for {len(found)} of {expected} {split} sentences")
        return task.decode_pieces([found[i] for i in range(expected)])

    def _bin(self, script: str) -> str:
        if self.venv is None:
            raise RuntimeError("call install(venvs) first: it locates (or creates) the fairseq environment")
        return str(self.venv / "bin" / script)


def _train_options(recipe: Recipe) -> list[str]:
    """fairseq-train's options for the recipe's model, optimisation and batches (the caller adds when to stop)."""
    setup = recipe.setup
    norm = ["--encoder-normalize-before", "--decoder-normalize-before"] if recipe.pre_norm else []
    return [
        "--task", "translation", "--arch", recipe.arch, "--share-all-embeddings",
        "--encoder-layers", str(setup.enc_layers), "--decoder-layers", str(setup.dec_layers),
        "--encoder-embed-dim", str(setup.d_model), "--decoder-embed-dim", str(setup.d_model),
        "--encoder-ffn-embed-dim", str(setup.ff_dim), "--decoder-ffn-embed-dim", str(setup.ff_dim),
        "--encoder-attention-heads", str(setup.heads), "--decoder-attention-heads", str(setup.heads),
        *norm,
        "--dropout", str(setup.dropout), "--attention-dropout", str(recipe.attention_dropout),
        "--activation-dropout", str(recipe.activation_dropout),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(setup.label_smoothing),
        "--optimizer", "adam", "--adam-betas", str(tuple(setup.adam_betas)), "--adam-eps", str(setup.adam_eps),
        "--clip-norm", str(setup.clip_norm),
        "--lr", str(setup.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(setup.warmup),
        # sentences x the longer side (with EOS) <= max_tokens (``data/data_utils.py``, batch_by_size);
        # pairs longer than max_length (with EOS) are left out.
        "--max-tokens", str(setup.batch_tokens), "--required-batch-size-multiple", "1",
        "--max-source-positions", str(setup.max_length), "--max-target-positions", str(setup.max_length),
        "--skip-invalid-size-inputs-valid-test",
        "--seed", str(setup.seed), "--cpu", "--num-workers", "0",
        # Validate and save once, at the last update (``fairseq_cli/train.py``, validate_and_save).
        "--validate-interval", "1000000", "--save-interval", "1000000", "--no-epoch-checkpoints",
        "--log-format", "simple",
    ]  # fmt: skip


def _env(setup: Setup) -> dict[str, str]:
    # torch>=2.6 loads checkpoints with weights_only=True by default; fairseq's hold omegaconf objects.
    return {**thread_env(setup.threads), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
