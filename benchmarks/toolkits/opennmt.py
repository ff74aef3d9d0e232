"""OpenNMT-py 3.5.1 adapter: the benchmark's Transformer, trained and decoded on CPU with onmt_train and onmt_translate.

ONMT trains on the task's pre-tokenized piece files (no tokenization transform) with the shared vocabulary
of ``task.vocab``, so both the pieces and the vocabulary size equal ours. Behaviour below was
checked in the installed sources (``onmt/...`` paths are relative to the package).

Known differences from our model that no option removes:

- Adam's epsilon is fixed at 1e-8 (``utils/optimizers.py``, ``build_torch_optimizer``), not 1e-9.
- The output layer keeps a bias when tied to the embeddings (``model_builder.py``, the generator is an
  ``nn.Linear`` whose weight alone is shared): vocabulary-size more parameters than ours.
- ``normalization: tokens`` divides the summed loss by the target tokens *without* EOS (``trainer.py``,
  ``_accum_batches``), while the loss and the token statistics include EOS.
- Within a training batch, an example whose source text already occurs in that batch is dropped
  (``inputters/dynamic_iterator.py``, ``batch_iter``'s ``seen`` set).
"""

import re
from pathlib import Path

import yaml
from toolkits.command import Command, install_venv, log_time, report_every, thread_env
from toolkits.task import Setup, Task

VERSION = "3.5.1"
# What ``onmt_train``/``onmt_translate`` import: configargparse, pyyaml and pyonmttok; sacrebleu (``scorers``);
# and, as ``transforms/__init__.py`` imports every transform module, the unused ones' imports too: numpy,
# rapidfuzz (fuzzymatch.py), pyahocorasick (inlinetags.py, terminology.py), spacy (terminology.py),
# fasttext (clean.py), regex (normalize.py). ctranslate2 and tensorboard are imported only when asked for.
RUNTIME_DEPS = [
    "configargparse", "pyyaml", "pyonmttok", "numpy", "sacrebleu", "regex",
    "rapidfuzz", "pyahocorasick", "spacy", "fasttext-wheel",
]  # fmt: skip

TRAIN_LOG = "onmt-train.log"
# Log lines are "[%Y-%m-%d %H:%M:%S,<ms> INFO] <message>" (``utils/logging.py``). ``trainer.py`` (``train``)
# logs "Start training loop ..." right before it starts its clock; a training report of
# ``utils/statistics.py`` (``Statistics.output``) reads
# "Step 20/ 300; acc: ...; sents: ...; bsz: <src>/<tgt>/<sents>; <src>/<tgt> tok/s; <secs> sec;".
STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO\] "
START = re.compile(STAMP + "Start training loop", re.MULTILINE)
REPORT = re.compile(STAMP + r"Step\s+(\d+)/\s*\d+;.*?bsz:\s*\d+/\s*(\d+)/\s*\d+;", re.MULTILINE)


class OpenNMT:
    name = "opennmt"

    def __init__(self) -> None:
        self.venv: Path | None = None  # set by install()

    def install(self, venvs: Path) -> None:
        """Create (or complete) ``venvs/opennmt``: OpenNMT-py on our CPU torch; later calls return at once."""
        self.venv = venvs / self.name
        # OpenNMT-py 3.5.1 requires torch<2.3 (and ctranslate2, spacy, ...): install it without dependencies
        # and add what it imports.
        install_venv(
            self.venv,
            "import onmt.bin.train, onmt.bin.translate",
            ["--no-deps", f"OpenNMT-py=={VERSION}"],
            RUNTIME_DEPS,
        )

    def train(self, task: Task, setup: Setup, updates: int, run_dir: Path) -> Command:
        """Write ``config.yaml`` into ``run_dir``; return the ``onmt_train`` command (its log goes to TRAIN_LOG)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "data": {
                "corpus_1": {
                    "path_src": str(task.pieces("train", "src")),
                    "path_tgt": str(task.pieces("train", "trg")),
                    "transforms": ["filtertoolong"],
                    "weight": 1,
                },
                "valid": {
                    "path_src": str(task.pieces("dev", "src")),
                    "path_tgt": str(task.pieces("dev", "trg")),
                    "transforms": [],
                },
            },
            # ``transforms/misc.py``: filtertoolong drops a pair if len(src) > src_seq_length or
            # len(tgt) > tgt_seq_length - 2 (pieces, before BOS/EOS). We keep pairs of at most max_length
            # subwords EOS included on each side, i.e. at most max_length - 1 pieces.
            "src_seq_length": setup.max_length - 1,
            "tgt_seq_length": setup.max_length + 1,
            # ``inputters/inputter.py``: a vocabulary file has one token (optionally "\t<count>") per line,
            # newline-terminated, as task.vocab; ``build_vocab`` puts <unk> <blank> <s> </s> before its tokens.
            "src_vocab": str(task.vocab),
            "share_vocab": True,
            "src_vocab_size": 1_000_000,  # no cut: keep every piece
            "vocab_size_multiple": 1,  # the default 8 pads the vocabulary with filler tokens
            "save_model": str(run_dir / "model"),
            "overwrite": True,
            "seed": setup.seed,
            # Model. ONMT 3.5.1's Transformer is pre-norm only, with a final layer norm after each stack
            # (``encoders/transformer.py``, ``decoders/transformer.py``, ``modules/position_ffn.py``).
            "encoder_type": "transformer",
            "decoder_type": "transformer",
            "enc_layers": setup.enc_layers,
            "dec_layers": setup.dec_layers,
            "hidden_size": setup.d_model,
            "word_vec_size": setup.d_model,
            "heads": setup.heads,
            "transformer_ff": setup.ff_dim,
            "dropout": [setup.dropout],
            "attention_dropout": [setup.dropout],
            # Biases in the attention and feed-forward projections are off by default (``opts.py``).
            "add_qkvbias": True,
            "add_ffnbias": True,
            "pos_ffn_activation_fn": "relu",
            # sin on even, cos on odd dimensions, as ours (``modules/embeddings.py``).
            "position_encoding": True,
            "position_encoding_type": "SinusoidalInterleaved",
            # "scaled-dot-flash" (the default) falls back to this on CPU anyway (``modules/multi_headed_attn.py``).
            "self_attn_type": "scaled-dot",
            "share_embeddings": True,
            "share_decoder_embeddings": True,
            "param_init": 0.0,  # the uniform init (default 0.1) takes precedence over glorot (``model_builder.py``)
            "param_init_glorot": True,
            # Optimisation.
            "optim": "adam",
            "adam_beta1": setup.adam_betas[0],
            "adam_beta2": setup.adam_betas[1],
            "max_grad_norm": setup.clip_norm,
            "label_smoothing": setup.label_smoothing,
            # ``utils/optimizers.py``: noam scales learning_rate by d^-0.5 * min(step^-0.5, step * warmup^-1.5),
            # the step counting from 1 at the first update; lr * sqrt(d * warmup) makes that
            # peak * min(step / warmup, sqrt(warmup / step)).
            "decay_method": "noam",
            "warmup_steps": setup.warmup,
            "learning_rate": setup.lr * (setup.d_model * setup.warmup) ** 0.5,
            # Batching (``inputters/dynamic_iterator.py``): a bucket takes the next bucket_size examples of
            # the endlessly repeated corpus, sorts them by (src, tgt) length and cuts them into batches of
            # sentences x max(len(src), len(tgt) + 2) tokens (pieces; the target with BOS and EOS) of at
            # most batch_size (the example that would overflow starts the next batch); the batches of a
            # bucket are shuffled. A bucket of one pass over the corpus makes that an epoch as ours; the
            # default 262144 examples would be 9 copies of Multi30k, built before the first update
            # (minutes, GBs), whose duplicates would then be dropped by the ``seen`` rule above.
            # batch_size_multiple 1 (the default for fp32) cuts batches at any number of sentences.
            "bucket_size": _count_lines(task.pieces("train", "src")),
            "batch_type": "tokens",
            "batch_size": setup.batch_tokens,
            "batch_size_multiple": 1,
            "valid_batch_size": setup.batch_tokens,  # same unit (tokens); the default is 32
            "normalization": "tokens",
            "accum_count": [1],
            # Batches are built in this process (as ours): the default 2 DataLoader worker processes would
            # compete with the 2 training threads for the CPU.
            # (In this process, ``inputters/dynamic_iterator.py``'s ``WeightedMixer._logging`` calls
            # ``init_logger()`` and so drops the handler of ``log_file``: train() tees stderr instead.)
            "num_workers": 0,
            "train_steps": updates,
            "valid_steps": updates,
            "save_checkpoint_steps": updates,
            "report_every": report_every(updates),
        }
        config_path = run_dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        tee = '"$0" -config "$1" 2>&1 | tee "$2"'
        train = [self._bin("onmt_train"), str(config_path), str(run_dir / TRAIN_LOG)]
        return Command(["bash", "-o", "pipefail", "-c", tee, *train], env=_env(setup))

    def throughput(self, run_dir: Path) -> tuple[int, float]:
        """Target tokens and seconds from the start of the training loop to the last report.

        ``utils/statistics.py``: a report covers the updates since the previous one; its n_words (the
        ``<tgt>`` of ``bsz`` per batch, rounded; ``tgt tok/s`` is n_words over the wall time of the
        interval) are the target tokens the loss counts: EOS included, BOS and padding excluded
        (``utils/loss.py``, ``_stats``). The seconds are taken from the log's millisecond time stamps
        (the reports' own ``sec`` is whole seconds); they include building the batches of each epoch's
        bucket. The last report is at the final update (``report_every``); validation and saving
        the checkpoint come after it (``trainer.py``, ``train``).
        """
        log = (run_dir / TRAIN_LOG).read_text(encoding="utf-8")
        start = START.search(log)
        reports = REPORT.findall(log)
        if start is None or not reports:
            raise ValueError(f"no training reports in {run_dir / TRAIN_LOG}")
        tokens, last = 0, 0
        for _, step, per_batch in reports:
            tokens += int(per_batch) * (int(step) - last)  # one batch per update (accum_count 1)
            last = int(step)
        return tokens, (log_time(reports[-1][0]) - log_time(start.group(1))).total_seconds()

    def translate(self, task: Task, setup: Setup, run_dir: Path, beam_size: int, out: Path) -> Command:
        """``onmt_translate`` with the final checkpoint on the test source pieces; pieces go to ``out``."""
        argv = [
            self._bin("onmt_translate"),
            "-model", str(final_checkpoint(run_dir)),
            "-src", str(task.pieces("test", "src")),
            "-output", str(out),
            # Beam size 1 runs BeamSearch with one beam, i.e. argmax at each step (the same output as
            # GreedySearch, which ``translate/translator.py`` uses only for sampling options).
            "-beam_size", str(beam_size),
            # ``translate/penalties.py``: wu = ((5 + len) / 6) ** alpha, len counting EOS; beam search
            # divides the running log-probabilities by it at every step (``translate/beam_search.py``).
            "-length_penalty", "wu",
            "-alpha", str(setup.alpha),
            "-batch_size", str(setup.decode_batch),
            "-batch_type", "sents",
            # ``translate/translator.py``: at most min(max_length, batch's longest source * ratio + 5) steps
            # (ours: 1.5 * source + 10 per sentence).
            "-max_length_ratio", "1.5",
        ]  # fmt: skip
        return Command(argv, env=_env(setup))

    def hypotheses(self, task: Task, out: Path) -> list[str]:
        """The hypotheses in ``out`` decoded from pieces to text."""
        return task.read_hypotheses(out)

    def _bin(self, script: str) -> str:
        if self.venv is None:
            raise RuntimeError("call install(venvs) first: it locates (or creates) the OpenNMT-py environment")
        return str(self.venv / "bin" / script)


def _env(setup: Setup) -> dict[str, str]:
    # torch>=2.6 loads checkpoints with weights_only=True, which ONMT's checkpoints (with an argparse
    # Namespace) fail (``models/model_saver.py``, ``load_checkpoint``).
    return {**thread_env(setup.threads), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def _count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def final_checkpoint(run_dir: Path) -> Path:
    """``<save_model>_step_<N>.pt`` with the largest N (``models/model_saver.py``)."""
    checkpoints = sorted(run_dir.glob("model_step_*.pt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    if not checkpoints:
        raise FileNotFoundError(f"no checkpoint in {run_dir}")
    return checkpoints[-1]
