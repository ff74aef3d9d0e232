"""fairseq 0.12 adapter (the ``fairseq-fixed`` 0.12.3.1 release, which runs on Python 3.11): the benchmark's
Transformer, binarized with fairseq-preprocess, trained with fairseq-train and decoded with fairseq-generate on CPU.

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

import re
import shlex
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
# fairseq_cli/train.py calls logging.basicConfig with whole-second time stamps at import; configure
# logging first (the default time stamps have milliseconds, as ``log_time`` reads), then run its main.
TRAIN_MAIN = (
    "import logging, sys\n"
    "logging.basicConfig(format='%(asctime)s | %(levelname)s | %(name)s | %(message)s', level='INFO', "
    "stream=sys.stdout)\n"
    "from fairseq_cli.train import cli_main\n"
    "cli_main()"
)
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \| INFO \| "
# fairseq_cli/train.py (``train``) logs "Start iterating over samples" before each epoch's loop, and every
# log_interval updates a report of the updates since the previous one (``logging/progress_bar.py``,
# SimpleProgressBar: "epoch 001:     20 / 45 loss=..., wpb=<mean target tokens per batch>, ...,
# num_updates=20, ..."), before validation and saving.
START = re.compile(STAMP + r"fairseq_cli\.train \| Start iterating over samples", re.MULTILINE)
REPORT = re.compile(STAMP + r".*?epoch \d+:\s+\d+ / \d+ .*?\bwpb=([\d.]+),.*?\bnum_updates=(\d+)", re.MULTILINE)
HYPOTHESIS = re.compile(r"^H-(\d+)\t[^\t]*\t(.*)$", re.MULTILINE)


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
        train = [self._bin("python"), "-c", TRAIN_MAIN, str(run_dir / "bin"), *_train_options(setup, updates)]
        train += ["--save-dir", str(run_dir / "checkpoints"), "--log-interval", str(report_every(updates))]
        script = f"{shlex.join(preprocess)} && {shlex.join(train)} 2>&1 | tee {shlex.quote(str(run_dir / TRAIN_LOG))}"
        return Command(["bash", "-o", "pipefail", "-c", script], env=_env(setup))

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

    def translate(self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path) -> Command:
        """fairseq-generate on the binarized test set with the last checkpoint; its report goes to ``out``."""
        argv = [
            self._bin("fairseq-generate"), str(run_dir / "bin"),
            "--path", str(run_dir / "checkpoints" / "checkpoint_last.pt"),
            "--gen-subset", "test", "--cpu", "--num-workers", "0",
            "--beam", str(beam_size), "--nbest", "1", "--lenpen", str(setup.alpha),
            "--batch-size", str(setup.decode_batch), "--required-batch-size-multiple", "1",
            # max length a x source (with EOS) + b, as ours.
            "--max-len-a", "1.5", "--max-len-b", "10",
        ]  # fmt: skip
        return Command(argv, env=_env(setup), stdout=out)

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        """The ``H-<id>`` lines of fairseq-generate's report, in test set order, decoded from pieces to text."""
        found = {int(i): hyp for i, hyp in HYPOTHESIS.findall(out.read_text(encoding="utf-8"))}
        expected = len(task.lines("test", "src"))
        if sorted(found) != list(range(expected)):
            raise ValueError(f"{out} has hypotheses for {len(found)} of {expected} test sentences")
        return task.decode_pieces([found[i] for i in range(expected)])

    def _bin(self, script: str) -> str:
        if self.venv is None:
            raise RuntimeError("call install(venvs) first: it locates (or creates) the fairseq environment")
        return str(self.venv / "bin" / script)


def _train_options(setup: Setup, updates: int) -> list[str]:
    """fairseq-train's options for the benchmark's model, optimisation and batches."""
    return [
        "--task", "translation", "--arch", "transformer", "--share-all-embeddings",
        "--encoder-layers", str(setup.enc_layers), "--decoder-layers", str(setup.dec_layers),
        "--encoder-embed-dim", str(setup.d_model), "--decoder-embed-dim", str(setup.d_model),
        "--encoder-ffn-embed-dim", str(setup.ff_dim), "--decoder-ffn-embed-dim", str(setup.ff_dim),
        "--encoder-attention-heads", str(setup.heads), "--decoder-attention-heads", str(setup.heads),
        "--encoder-normalize-before", "--decoder-normalize-before",
        # Ours drops out after the embeddings, attention weights, FFN activation and each sublayer.
        "--dropout", str(setup.dropout), "--attention-dropout", str(setup.dropout),
        "--activation-dropout", str(setup.dropout),
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", str(setup.label_smoothing),
        "--optimizer", "adam", "--adam-betas", str(tuple(setup.adam_betas)), "--adam-eps", str(setup.adam_eps),
        "--clip-norm", str(setup.clip_norm),
        "--lr", str(setup.lr), "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(setup.warmup),
        # sentences x the longer side (with EOS) <= max_tokens (``data/data_utils.py``, batch_by_size);
        # pairs longer than max_length (with EOS) are left out.
        "--max-tokens", str(setup.batch_tokens), "--required-batch-size-multiple", "1",
        "--max-source-positions", str(setup.max_length), "--max-target-positions", str(setup.max_length),
        "--skip-invalid-size-inputs-valid-test",
        "--max-update", str(updates), "--seed", str(setup.seed), "--cpu", "--num-workers", "0",
        # Validate and save once, at the last update (``fairseq_cli/train.py``, validate_and_save).
        "--validate-interval", "1000000", "--save-interval", "1000000", "--no-epoch-checkpoints",
        "--log-format", "simple",
    ]  # fmt: skip


def _env(setup: Setup) -> dict[str, str]:
    # torch>=2.6 loads checkpoints with weights_only=True by default; fairseq's hold omegaconf objects.
    return {**thread_env(setup.threads), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
