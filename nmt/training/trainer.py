"""A training run's fixed parts, :class:`Trainer`, and :func:`start_training`, which sets them up: seed, subword
models and data, model and optimizer, fine-tuned weights or the resumed :class:`~nmt.training.state.TrainState`."""

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config import TrainConfig
from nmt.data.batches import corpus_tokens, epoch_batches, temperature_weights, weighted_epoch
from nmt.data.binarize import BinarizedData, binarize, open_training_data
from nmt.data.subword import load_subword
from nmt.device import grad_scaler
from nmt.errors import ConfigError
from nmt.evaluation.metrics import get_metric
from nmt.model_dir import SRC_SPM, TRG_SPM, differing_subword_models, read_model_file
from nmt.models.seq2seq import Seq2Seq, build_model
from nmt.training.curves import Curves
from nmt.training.distributed import World
from nmt.training.files import TrainFiles
from nmt.training.identity import set_aside_other_training, training_identity
from nmt.training.loss import LabelSmoothedCrossEntropy
from nmt.training.optimizer import make_optimizer, warn_about_schedule
from nmt.training.state import TrainState
from nmt.training.validation import DevSet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trainer:
    """What stays fixed while a model trains; what changes, and ``last.pt`` holds, is a :class:`TrainState`."""

    config: TrainConfig
    world: World
    device: torch.device
    files: TrainFiles
    data: BinarizedData  # the training set, memory-mapped
    weights: list[float] | None  # of its corpora, in their order (config.corpus_weights by name, or by temperature)
    shares: list[float] | None  # of each batch's tokens per corpus, in their order (config.mix by name)
    dev: DevSet
    trained: torch.nn.Module  # the model, or its DistributedDataParallel wrapper
    criterion: LabelSmoothedCrossEntropy
    curves: Curves | None  # rank 0 only

    @property
    def last(self) -> Path:
        return self.files.ckpt_dir / "last.pt"


def start_training(
    model_options: dict[str, Any], config: TrainConfig, files: TrainFiles, device: torch.device, world: World
) -> tuple[Trainer, TrainState]:
    """Seed, load the subword models and the data, build the model and its optimizer, resume from ``last.pt``."""
    model_dir = Path(files.model_dir)
    src_spm, trg_spm, train_data = files.src_spm, files.trg_spm, files.train_data
    if config.threads > 0:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    src_sp, trg_sp = load_subword(src_spm), load_subword(trg_spm)
    shared_vocab = src_sp.serialized_model_proto() == trg_sp.serialized_model_proto()
    if not isinstance(train_data, (str, Path)):  # text: encoded again at every start, by rank 0 only
        text, train_data = train_data, model_dir / "train"
        if world.is_main:
            binarize(*text, src_spm, trg_spm, train_data, config.max_length, max(1, config.threads))
        world.barrier()
    data = open_training_data(train_data, src_spm, trg_spm, config.max_length)  # memory-mapped, shared
    weights = data.corpus_weights(config.corpus_weights)  # in the order of the binarized corpora
    if config.temperature is not None:  # from the corpora's sizes: a multilingual model's directions
        weights = temperature_weights(data.parts, config.temperature)
    shares = data.corpus_shares(config.mix)
    dev = DevSet.load(files.dev_src, files.dev_ref, src_sp, trg_sp)
    get_metric("bleu", config.trg_lang)  # a missing tokenizer fails now, not at the first validation
    log.info("training pairs: %d (of at most %d subwords), dev pairs: %d", len(data), config.max_length, len(dev))
    log_corpora(data, config, weights, shares)
    if world.is_main:
        warn_about_schedule(config)
    if world.size > 1:
        log.info("data parallel: %d processes, each on 1/%d of every batch (%s)", world.size, world.size, device)

    model = build_model(model_options, src_sp.get_piece_size(), trg_sp.get_piece_size(), shared_vocab).to(device)
    identity = training_identity(model.spec, config, data, files)
    resumes = world.broadcast(set_aside_other_training(model_dir, identity) if world.is_main else None)
    if config.init_from is not None and not resumes:  # a resumed run has its own weights
        init_weights(model, config.init_from, src_spm, trg_spm, device)
    if world.rank > 0:  # the same initial weights everywhere, other dropout masks on other ranks
        torch.manual_seed(config.seed + world.rank)
    state = TrainState(model, make_optimizer(model, config), grad_scaler(device, config.bf16), identity=identity)
    if resumes:
        state.resume(files.ckpt_dir / "last.pt", device, world, config.seed)
    curves = None
    if world.is_main:
        curves = Curves(model_dir, state.train_log, state.history, state.progress["step"], config.tensorboard)
    trained = model
    if world.size > 1:
        trained = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    criterion = LabelSmoothedCrossEntropy(config.label_smoothing)
    return Trainer(config, world, device, files, data, weights, shares, dev, trained, criterion, curves), state


def log_corpora(
    data: BinarizedData, config: TrainConfig, weights: list[float] | None, shares: list[float] | None
) -> None:
    """Log how the corpora make up an epoch: the pairs drawn under ``weights``, or under a mix (``shares``) the
    corpora left out and each corpus's share of the first epoch's target tokens as realised."""
    names = data.corpus_names
    if weights is not None:
        drawn = weighted_epoch(data.parts, weights, config.seed, 1)
        corpora = ", ".join(f"{n} {p} pairs x {w:g}" for n, p, w in zip(names, data.parts, weights, strict=True))
        log.info("corpus weights: %s: %d pairs per epoch", corpora, len(data) if drawn is None else len(drawn))
    if shares is None:
        return
    left_out = [name for name, share in zip(names, shares, strict=True) if share == 0]
    if left_out:
        log.info("mix: corpora %s are not in the mix, so not drawn", left_out)
    lengths = (data.src.lengths, data.trg.lengths)
    batches = epoch_batches(*lengths, data.parts, config.batch_tokens, config.seed, 1, shares=shares)
    tokens = corpus_tokens(batches, data.trg.lengths, data.parts)
    mix = ", ".join(
        f"{name} {share:.3f} (realised {n / tokens.sum():.3f})"
        for name, share, n in zip(names, shares, tokens, strict=True)
        if share > 0
    )
    log.info("mix of each batch's target tokens: %s; %d batches per epoch", mix, len(batches))


def init_weights(
    model: Seq2Seq, init_from: str | Path, src_spm: str | Path, trg_spm: str | Path, device: torch.device
) -> None:
    """Load the weights of the model directory ``init_from`` into ``model``, for fine-tuning.

    Only the weights: the optimizer and the learning-rate schedule start anew.

    :raises ConfigError: if the subword models (compared by sha256) or the architecture differ
    """
    init_from = Path(init_from)
    ckpt = read_model_file(init_from, device)
    for side in differing_subword_models(init_from, src_spm, trg_spm):
        ours, theirs = (src_spm, init_from / SRC_SPM) if side == "source" else (trg_spm, init_from / TRG_SPM)
        raise ConfigError(
            f"training.init_from: {theirs} is not the {side} subword model {ours} of this run "
            "(fine-tuning needs the same vocabularies)"
        )
    spec = ckpt["spec"]
    if spec["arch"] != model.spec["arch"]:
        raise ConfigError(f"training.init_from: {init_from} holds a {spec['arch']}, not a {model.spec['arch']}")
    differ = [
        f"{key} {spec['config'].get(key)!r} != {value!r}"
        for key, value in model.spec["config"].items()
        if key != "dropout" and spec["config"].get(key) != value
    ]
    if differ:
        raise ConfigError(f"training.init_from: {init_from} has another architecture ({', '.join(differ)})")
    model.load_state_dict(ckpt["model"])
    log.info("initialized the weights from %s (fine-tuning; new optimizer and schedule)", init_from)
