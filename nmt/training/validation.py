"""Dev-set scores during training: per-token loss and perplexity, and BLEU and chrF as the test sets are scored;
and a multilingual model's dev scores per direction once it is trained."""

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm
import torch

from nmt.atomic import read_lines, write_text
from nmt.config import DecodeConfig, TrainConfig
from nmt.data.batches import ParallelData, make_batch, token_batches
from nmt.decoding.translation import Translator, load_decoding, position_limit, translate_lines
from nmt.device import autocast
from nmt.errors import DataError
from nmt.evaluation.metrics import score_metric
from nmt.model_dir import tag_input
from nmt.models.seq2seq import Seq2Seq
from nmt.training.loss import LabelSmoothedCrossEntropy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DevSet:
    """The dev set as subword ids (for the loss) and as lines (to translate and score), with the subword models.

    ``names`` are its source and reference files, named in warnings and errors.
    """

    data: ParallelData
    src_lines: list[str]
    ref_lines: list[str]
    src_sp: spm.SentencePieceProcessor
    trg_sp: spm.SentencePieceProcessor
    names: tuple[str, str] = ("source", "reference")
    # The position limits whose over-long pairs were warned of: one warning per run, not one per validation.
    warned: set[int] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def load(
        cls, src: str | Path, ref: str | Path, src_sp: spm.SentencePieceProcessor, trg_sp: spm.SentencePieceProcessor
    ) -> "DevSet":
        """Read the source and reference files and encode them.

        :raises DataError: naming the file if one is unreadable, the two differ in length or both are empty
        """
        src_lines, ref_lines = read_lines(src), read_lines(ref)
        if not src_lines and not ref_lines:
            raise DataError(f"{src} and {ref}: the dev set is empty; validation needs sentence pairs")
        names = (str(src), str(ref))
        data = ParallelData.from_lines(src_lines, ref_lines, src_sp, trg_sp, names=names)
        return cls(data, src_lines, ref_lines, src_sp, trg_sp, names)

    def __len__(self) -> int:
        return len(self.data)

    def within(self, limit: int | None) -> np.ndarray | None:
        """The pairs whose source and target (EOS included) fit in ``limit`` positions, the model's
        :func:`~nmt.decoding.translation.position_limit`; None when every pair does.

        A dev set is not cut to ``max_length`` as the training data is, and a pair past the positions of a
        Transformer or ConvS2S would end validation in an error. The first call for a ``limit`` warns of the
        pairs left out.

        :raises DataError: naming the files when no pair fits
        """
        if limit is None:
            return None
        fits = (self.data.src.lengths <= limit) & (self.data.trg.lengths <= limit)  # (N,)
        if fits.all():
            return None
        long = np.flatnonzero(~fits)
        if len(long) == len(fits):
            raise DataError(f"{self.names[0]}, {self.names[1]}: no dev pair fits the model's {limit} positions")
        if limit not in self.warned:
            self.warned.add(limit)
            lines = ("line " if len(long) == 1 else "lines ") + ", ".join(str(i + 1) for i in long[:10])
            lines += ", ..." if len(long) > 10 else ""
            log.warning(
                "%s, %s: %d of %d dev pairs longer than the model's %d positions (%s) are left out of the dev "
                "loss; BLEU and chrF still translate every source, cut to that length",
                self.names[0],
                self.names[1],
                len(long),
                len(fits),
                limit,
                lines,
            )
        return np.flatnonzero(fits)


def dev_batch_tokens(config: TrainConfig, world_size: int) -> int:
    """The tokens of a dev batch: one process's share of a training batch (``batch_tokens / world_size``).

    One process validates while the others wait; ``batch_tokens`` is the batch of all processes
    together, so a dev batch that size would be ``world_size`` times the forward pass that training
    showed to fit (8 GPUs at 65k tokens: about 12 GB of logits).
    """
    return max(1, config.batch_tokens // world_size)


@torch.no_grad()
def validate(
    model: Seq2Seq, dev: DevSet, config: TrainConfig, device: torch.device, batch_tokens: int | None = None
) -> dict[str, float]:
    """Dev-set per-token loss and perplexity (teacher forcing), and BLEU and chrF as the test set is scored.

    The dev set is translated by :func:`valid_search` and scored with the BLEU tokenizer of the
    target language (:func:`nmt.evaluation.metrics.score_metric`, as for the test sets), so the checkpoint
    is selected on the scale of the reported figure. The loss leaves out the pairs longer than the model's
    positions (:meth:`DevSet.within`); every source is translated, cut to them where longer.

    :param batch_tokens: tokens of a dev batch for the loss (:func:`dev_batch_tokens`); by default
        ``config.batch_tokens``, a training batch of one process
    :return: ``loss``, ``ppl``, ``bleu``, ``chrf``, and ``bleu_signature`` and ``chrf_signature`` (sacreBLEU's,
        with the search appended)
    """
    sample = dev.within(position_limit(model))  # the pairs the model can take: the loss is theirs
    model.eval()
    criterion = LabelSmoothedCrossEntropy(0.0)
    nll_sum, n_tokens = 0.0, 0
    batch_tokens = batch_tokens or config.batch_tokens
    lengths = dev.data.src.lengths, dev.data.trg.lengths
    for indices in token_batches(*lengths, batch_tokens, seed=0, epoch=0, sample=sample):
        batch = make_batch(dev.data, indices).to(device)
        with autocast(device, config.bf16):
            logits = model(batch.src, batch.trg_in)
        _, nll = criterion(logits, batch.trg_out)
        nll_sum, n_tokens = nll_sum + float(nll), n_tokens + batch.n_trg_tokens
    search = valid_search(config)
    translator = Translator(model, dev.src_sp, dev.trg_sp, search, device, config.bf16)
    hyps = translate_lines(translator, dev.src_lines, dev.names[0])
    scores = {}
    for name in ("bleu", "chrf"):
        score, signature = score_metric(name, hyps, dev.ref_lines, config.trg_lang)
        scores |= {name: score, f"{name}_signature": f"{signature}|search:{search.describe()}"}
    log.info(
        "dev BLEU %.2f, sacreBLEU %s; chrF %.2f, %s",
        scores["bleu"],
        scores["bleu_signature"],
        scores["chrf"],
        scores["chrf_signature"],
    )
    model.train()
    loss = nll_sum / max(n_tokens, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), **scores}


def valid_search(config: TrainConfig) -> DecodeConfig:
    """Greedy search for ``valid_beam_size`` 1, else beam search with the test-set defaults (length penalty 1)."""
    if config.valid_beam_size == 1:
        return DecodeConfig(method="greedy")
    return DecodeConfig(method="beam", beam_size=config.valid_beam_size)


def score_directions(
    model_dir: str | Path,
    directions: list[str],
    srcs: list[str | Path],
    refs: list[str | Path],
    config: TrainConfig,
    json_path: str | Path,
    md_path: str | Path,
    zero_shot: tuple[str, ...] = (),
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """The dev BLEU and chrF of a multilingual model in each of its directions (its training validated on their dev
    sets together): each dev source tagged with the direction's target language, translated by the validation's
    search, scored as the test sets are (BLEU's tokenizer of the target language).

    :param directions: ``SRC-TRG`` each, with the dev source ``srcs[i]`` (normalized) and reference ``refs[i]``
    :param config: the model's training, whose ``valid_beam_size``, ``device`` and ``bf16`` the search takes
    :param zero_shot: the directions it was not trained on (the ``kind`` column says so)
    :return: a record per direction: direction, kind, lines, bleu, chrf, their signatures; written as JSON to
        ``json_path`` and as a Markdown table to ``md_path``
    """
    search = valid_search(config)
    translator = load_decoding([model_dir], search, config.device, config.bf16, threads=threads)
    rows = []
    for direction, src, ref in zip(directions, srcs, refs, strict=True):
        trg_lang = direction.split("-")[1]
        hyps = translate_lines(translator, list(tag_input(model_dir, read_lines(src), trg_lang)), str(src))
        row = {"direction": direction, "kind": "zero-shot" if direction in zero_shot else "trained", "lines": len(hyps)}
        for name in ("bleu", "chrf"):
            score, signature = score_metric(name, hyps, read_lines(ref), trg_lang)
            row |= {name: round(score, 2), f"{name}_signature": f"{signature}|search:{search.describe()}"}
        log.info("%s (%s): dev BLEU %.2f, chrF %.2f", direction, row["kind"], row["bleu"], row["chrf"])
        rows.append(row)
    write_text(json_path, json.dumps(rows, indent=2) + "\n")
    table = ["| direction | kind | dev BLEU | dev chrF |", "|---|---|---:|---:|"]
    table += [f"| {r['direction']} | {r['kind']} | {r['bleu']:.2f} | {r['chrf']:.2f} |" for r in rows]
    write_text(md_path, "\n".join([*table, "", f"{model_dir}, search: {search.describe()}", ""]))
    return rows
