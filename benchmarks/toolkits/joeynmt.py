"""Joey NMT 2.3.0 adapter: the benchmark's Transformer trained and decoded on CPU with ``python -m joeynmt``.

Joey trains on the task's pre-tokenized piece files (``level: word``: a line is split at single spaces, no
lowercasing or normalisation) with the shared vocabulary ``task.vocab``, so both the pieces and the vocabulary
size equal ours (Joey puts its specials <unk> <pad> <s> </s> first). Behaviour below was checked in the
installed sources (``joeynmt/...`` paths are relative to the package).

Known differences from our setup that no option removes:

- Adam's epsilon is torch's default 1e-8, not 1e-9: ``builders.py`` (``build_optimizer``) passes only lr,
  betas and weight decay.
- Update k >= 2 runs at the learning rate of step k - 1 (ours: of step k): the scheduler is stepped after the
  update (``training.py``, ``train_and_validate``). Update 1 runs at the optimizer's initial
  ``learning_rate``, which is set to the rate of step 1.
- Token batches are not sorted by length (``datasets.py``, ``TokenBatchSampler``: "no bucketing"), so they
  hold more padding, and they close at the first sentence that brings sentences x max(source + 1,
  target + 1) to *at least* ``batch_size`` (ours stays within it).
- Label smoothing spreads epsilon over V - 2 labels and gives the reference exactly 1 - epsilon (``loss.py``).
- Beam search keeps finished hypotheses in the beam until all of a sentence's are finished (``search.py``).
- Decoding forbids EOS as the first token (``min_output_length`` 1, ``search.py``), and test sentences are
  decoded in batches in file order (no sorting by length).
"""

import re
from pathlib import Path

import yaml
from toolkits.command import Command, install_venv, log_time, report_every, thread_env
from toolkits.task import Setup, Task

VERSION = "2.3.0"

# ``prediction.py`` (``prepare``) seeds torch only after building and initialising the model, so Joey's
# ``random_seed`` leaves the initial weights to torch's random default seed. Seed first, then run Joey's
# command line (argv: seed, then Joey's own arguments).
SEEDED_MAIN = "import sys, torch; torch.manual_seed(int(sys.argv.pop(1)))\nfrom joeynmt.__main__ import main; main()"

# A line of ``train.log`` (``helpers_for_ddp.py``, ``get_logger``: "%(asctime)s - %(levelname)s - ...").
LOG_TIME = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - \w+ - [\w.]+ - "


class JoeyNMT:
    name = "joeynmt"

    def __init__(self) -> None:
        self.venv: Path | None = None  # set by install()

    def install(self, venvs: Path) -> None:
        """Create ``venvs/joeynmt`` with Joey NMT on the CPU build of torch (once)."""
        self.venv = venvs / self.name
        # ``joeynmt/helpers.py`` imports importlib_metadata without declaring it.
        install_venv(
            self.venv, "import joeynmt.training, joeynmt.prediction", [f"joeynmt=={VERSION}", "importlib_metadata"]
        )

    def train(self, task: Task, setup: Setup, updates: int, run_dir: Path) -> Command:
        """Write ``config.yaml`` (and links to the piece files) into ``run_dir``; return the training command."""
        data_dir = run_dir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        # ``datasets.py`` (``PlaintextDataset.load_data``) reads ``<path>.<lang>``: link the piece files so.
        for split in ("train", "dev"):
            for side, lang in (("src", task.src_lang), ("trg", task.trg_lang)):
                link = data_dir / f"{split}.{lang}"
                link.unlink(missing_ok=True)
                link.symlink_to(task.pieces(split, side).resolve())
        side_config = {
            "level": "word",
            "lowercase": False,
            "normalize": False,
            # ``tokenizers.py`` (``_filter_by_length``): a training pair is dropped if a side has more than
            # max_length pieces (EOS not counted). We keep at most max_length subwords EOS included.
            "max_length": setup.max_length - 1,
            # ``vocabulary.py``: one token per line, used as is (no frequency cut) after Joey's 4 specials.
            "voc_file": str(task.vocab),
        }
        config = {
            "name": "benchmark",
            "model_dir": str(run_dir / "model"),
            "use_cuda": False,
            "random_seed": setup.seed,  # data order and dropout (see SEEDED_MAIN for the initial weights)
            "num_workers": 0,
            "data": {
                "train": str(data_dir / "train"),
                "dev": str(data_dir / "dev"),
                "dataset_type": "plain",
                "src": {"lang": task.src_lang, **side_config},
                "trg": {"lang": task.trg_lang, **side_config},
            },
            # Validation (greedy, ``config.py``, ``set_validation_args``) on the small dev set.
            "testing": _testing(task, setup, split="dev", beam_size=1),
            "training": {
                "optimizer": "adam",
                "adam_betas": list(setup.adam_betas),
                # ``builders.py``: noam sets lr = learning_rate_factor * d^-0.5 * min(step^-0.5,
                # step * warmup^-1.5), d being the encoder's hidden size, with no floor; a factor of
                # peak * sqrt(d * warmup) makes that peak * min(step / warmup, sqrt(warmup / step)).
                # ("warmupinversesquareroot" has the same formula but its peak is ``learning_rate``, which
                # is also the rate of the first update, and ``learning_rate_peak`` never reaches it.)
                "scheduling": "noam",
                "learning_rate_factor": setup.lr * (setup.d_model * setup.warmup) ** 0.5,
                "learning_rate_warmup": setup.warmup,
                # The optimizer's rate before the first scheduler step: lr at step 1.
                "learning_rate": setup.lr / setup.warmup,
                # ``training.py`` (``_log_scores``) stops training once lr < learning_rate_min (default 1e-4,
                # above the warm-up's first rates).
                "learning_rate_min": 0.0,
                "clip_grad_norm": setup.clip_norm,
                "loss": "crossentropy",
                "label_smoothing": setup.label_smoothing,
                "normalization": "tokens",
                "batch_type": "token",
                "batch_size": setup.batch_tokens,
                "batch_multiplier": 1,
                "shuffle": True,
                "updates": updates,
                "epochs": updates,  # the default 3 would end training first; an epoch has at least one update
                "validation_freq": updates,
                # ``config.py``: logging_freq must divide validation_freq.
                "logging_freq": report_every(updates),
                "early_stopping_metric": "ppl",
                "keep_best_ckpts": 1,
                "print_valid_sents": [],
                "overwrite": True,  # model_dir is ours (run_dir/model); Joey deletes and recreates it
            },
            "model": {
                "initializer": "xavier_uniform",
                "bias_initializer": "zeros",
                "embed_initializer": "normal",
                "embed_init_weight": setup.d_model**-0.5,
                "tied_embeddings": True,
                "tied_softmax": True,
                "encoder": _stack(setup, setup.enc_layers),
                "decoder": _stack(setup, setup.dec_layers),
            },
        }
        config_path = run_dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
        # --skip-test: without it Joey decodes the dev (and test) set again after training.
        argv = [self._python(), "-c", SEEDED_MAIN, str(setup.seed), "train", str(config_path), "--skip-test"]
        return Command(argv, env=thread_env(setup.threads))

    def throughput(self, run_dir: Path) -> tuple[int, float]:
        """Target tokens of the training batches and the seconds from the first epoch to the last update.

        Tokens: ``stats_state.total_tokens`` of the final checkpoint, the sum of ``Batch.ntokens``
        (``batch.py``: non-padding tokens of the target without BOS, so EOS included); the log reports only
        rounded rates. Seconds: between the timestamps of ``train.log``'s "EPOCH 1" line (right before the
        training loop starts its clock) and the report of the last update, which is logged before
        validation and checkpointing (``training.py``, ``train_and_validate``).
        """
        model_dir = run_dir / "model"
        import torch  # here: the harness stays small (toolkits/measure.py)

        stats = torch.load(model_dir / "latest.ckpt", map_location="cpu", weights_only=True)["stats_state"]
        log = (model_dir / "train.log").read_text(encoding="utf-8")
        start = re.search(LOG_TIME + r"EPOCH 1$", log, re.MULTILINE)
        end = re.search(LOG_TIME + rf"Epoch\s+\d+, Step:\s+{stats['steps']},", log, re.MULTILINE)
        if start is None or end is None:
            raise ValueError(f"no training reports in {model_dir / 'train.log'}")
        seconds = (log_time(end.group(1)) - log_time(start.group(1))).total_seconds()
        return stats["total_tokens"], seconds

    def translate(self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path) -> Command:
        """Translate the test source pieces from stdin with the final checkpoint; pieces go to ``out``.

        ``joeynmt translate -o`` fails in 2.3.0 (``prediction.py``, ``translate``: ``args.n_best`` does not
        exist), so the hypotheses are read from stdout.
        """
        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
        config["testing"] = {
            **_testing(task, setup, split="test", beam_size=beam_size),
            "load_model": str(run_dir / "model" / "latest.ckpt"),
        }
        config_path = run_dir / f"translate_beam{beam_size}.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
        argv = [self._python(), "-m", "joeynmt", "translate", str(config_path)]
        # Pieces ("▁") pass through stdin/stdout, whose encoding would otherwise follow the locale.
        env = {**thread_env(setup.threads), "PYTHONIOENCODING": "utf-8"}
        return Command(argv, env=env, stdin=task.pieces("test", "src"), stdout=out)

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        """The hypotheses in ``out`` decoded from pieces to text.

        Joey skips blank input lines (``prediction.py``, ``translate``), hence the check in ``read_hypotheses``.
        """
        return task.read_hypotheses(out)

    def _python(self) -> str:
        if self.venv is None:
            raise RuntimeError("call install(venvs) first: it locates (or creates) the Joey NMT environment")
        return str(self.venv / "bin" / "python")


def _stack(setup: Setup, num_layers: int) -> dict:
    """The ``encoder``/``decoder`` section: a pre-norm Transformer stack with scaled embeddings."""
    return {
        "type": "transformer",
        "num_layers": num_layers,
        "num_heads": setup.heads,
        "hidden_size": setup.d_model,
        "ff_size": setup.ff_dim,
        "dropout": setup.dropout,
        # The layers and the final norm of ``encoders.py`` default to different positions: set both.
        "layer_norm": "pre",
        "activation": "relu",
        "embeddings": {"embedding_dim": setup.d_model, "scale": True, "dropout": setup.dropout},
    }


def _testing(task: Task, setup: Setup, split: str, beam_size: int) -> dict:
    """The ``testing`` section: decoding of ``split``'s source in batches of ``setup.decode_batch`` sentences."""
    longest = max(len(line.split()) for line in task.pieces(split, "src").read_text(encoding="utf-8").splitlines())
    return {
        "batch_type": "sentence",
        "batch_size": setup.decode_batch,
        "beam_size": beam_size,
        # ``search.py`` (``beam_search``): scores are divided by ((5 + steps) / 6) ** alpha, steps counting EOS.
        "beam_alpha": setup.alpha,
        "n_best": 1,
        # A step limit for the whole set (``search.py``); ours is 1.5 * source + 10 per sentence (source with
        # EOS), so no hypothesis is cut shorter than ours would be. (Joey's default adapts to the batch's
        # longest source, 1.5 * its length, without the + 10.)
        "max_output_length": int(1.5 * (longest + 1) + 10),
    }
