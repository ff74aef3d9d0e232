"""Greedy search and sampling over the decoder contract of :mod:`nmt.models.seq2seq` (no architecture branches), and
what every search shares (beam search: :mod:`nmt.decoding.beam`).

Every search, as fairseq's: PAD and BOS are never generated, nor UNK when sampling (a label-smoothed model gives it
mass, which shows as "⁇" in synthetic sources), and a non-empty source never gets an empty output (EOS cannot
come first: minimum output length 1).

Legend: B batch, V vocabulary, S source length.
"""

import torch
import torch.nn.functional as F

from nmt.models.decoding_state import reorder_state
from nmt.models.seq2seq import DecodingModel
from nmt.vocab import BOS, EOS, PAD, UNK

# Tokens that no search generates; sampling does not draw UNK either.
NEVER_GENERATED = (PAD, BOS)
NEVER_SAMPLED = (PAD, BOS, UNK)


def max_output_lengths(src: torch.Tensor, max_len_a: float, max_len_b: int) -> torch.Tensor:
    """Per-sentence limit ``a * S + b`` on generated tokens (EOS included), shape (B,)."""
    src_len = (src != PAD).sum(dim=1)
    return (src_len.float() * max_len_a + max_len_b).long().clamp(min=1)


def is_nonempty(src: torch.Tensor) -> torch.Tensor:
    """Whether each source holds a token besides EOS, shape (B,): those get no empty output."""
    return (src != PAD).sum(dim=1) > 1


def ban(scores: torch.Tensor, banned: tuple[int, ...], no_eos: torch.Tensor | None) -> torch.Tensor:
    """``scores`` (B, V), in place, with -inf at the ``banned`` ids and at EOS in the rows where ``no_eos`` (B,) holds.

    :param no_eos: the rows that may not end now (at the first step: a non-empty source), or None
    """
    scores[:, list(banned)] = float("-inf")
    if no_eos is not None:
        scores[:, EOS].masked_fill_(no_eos, float("-inf"))
    return scores


@torch.no_grad()
def greedy_search(
    model: DecodingModel, src: torch.Tensor, max_len_a: float = 1.5, max_len_b: int = 10
) -> list[list[int]]:
    """Pick the most probable token at every step.

    :param src: source ids (B, S) with EOS, right-padded
    :return: for each sentence the output ids without EOS
    """
    return _one_path_search(model, src, lambda logits: logits.argmax(dim=-1), NEVER_GENERATED, max_len_a, max_len_b)


@torch.no_grad()
def sample_search(
    model: DecodingModel,
    src: torch.Tensor,
    topk: int = 0,
    generator: torch.Generator | None = None,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
) -> list[list[int]]:
    """Draw every token from the model's distribution (Edunov et al. 2018), optionally from the k best only.

    UNK, PAD and BOS are never drawn: the distribution is renormalised over the other tokens.

    :param src: source ids (B, S) with EOS, right-padded
    :param topk: sample among the ``topk`` most probable tokens; 0 samples from the whole vocabulary
    :param generator: random generator on ``src.device``, for reproducible samples
    :return: for each sentence the output ids without EOS
    """

    def draw(logits: torch.Tensor) -> torch.Tensor:  # (B, V) -> (B,), banned tokens at -inf
        if topk:
            values, indices = logits.topk(min(topk, logits.size(-1)), dim=-1)
            choice = torch.multinomial(F.softmax(values, dim=-1), 1, generator=generator)
            return indices.gather(1, choice).squeeze(1)
        return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)

    return _one_path_search(model, src, draw, NEVER_SAMPLED, max_len_a, max_len_b)


def _one_path_search(
    model: DecodingModel, src: torch.Tensor, choose, banned: tuple[int, ...], max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """Extend one hypothesis per sentence with ``choose(logits (n, V)) -> (n,)`` until EOS or the limit.

    ``choose`` sees float32 logits with -inf at the ``banned`` ids (and at EOS first, for a non-empty source). A
    sentence leaves the batch when it ends, so the work shrinks as sentences finish.
    """
    B = src.size(0)
    limit = max_output_lengths(src, max_len_a, max_len_b)  # (n,) for the n active sentences
    outputs = src.new_full((B, int(limit.max())), PAD)
    state = model.init_state(src)
    prev = src.new_full((B,), BOS)
    active = torch.arange(B, device=src.device)  # (n,) the row in outputs of each active sentence
    for t in range(outputs.size(1)):
        logits, state = model.step(prev, state)
        prev = choose(ban(logits.float(), banned, is_nonempty(src) if t == 0 else None))  # (n,)
        prev = prev.masked_fill(limit <= t + 1, EOS)  # forced end at the limit
        outputs[active, t] = prev
        going = prev != EOS
        if not bool(going.all()):
            if not bool(going.any()):
                break
            rows = going.nonzero().flatten()
            active, prev, limit = active[rows], prev[rows], limit[rows]
            state = reorder_state(state, rows)
    return [_strip(row) for row in outputs.tolist()]


def _strip(ids: list[int]) -> list[int]:
    return ids[: ids.index(EOS)] if EOS in ids else [i for i in ids if i != PAD]
