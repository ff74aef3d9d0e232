"""Greedy, sampling and beam search over the decoder contract of :mod:`nmt.model` (no architecture branches).

Legend: B batch, K beam size, V vocabulary, S source length.
"""

import torch
import torch.nn.functional as F

from nmt.data import BOS, EOS, PAD
from nmt.model import DecodingModel, reorder_state


def max_output_lengths(src: torch.Tensor, max_len_a: float, max_len_b: int) -> torch.Tensor:
    """Per-sentence limit ``a * S + b`` on generated tokens (EOS included), shape (B,)."""
    src_len = (src != PAD).sum(dim=1)
    return (src_len.float() * max_len_a + max_len_b).long().clamp(min=1)


@torch.no_grad()
def greedy_search(
    model: DecodingModel, src: torch.Tensor, max_len_a: float = 1.5, max_len_b: int = 10
) -> list[list[int]]:
    """Pick the most probable token at every step.

    :param src: source ids (B, S) with EOS, right-padded
    :return: for each sentence the output ids without EOS
    """
    return _one_path_search(model, src, lambda logits: logits.argmax(dim=-1), max_len_a, max_len_b)


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

    :param src: source ids (B, S) with EOS, right-padded
    :param topk: sample among the ``topk`` most probable tokens; 0 samples from the whole vocabulary
    :param generator: random generator on ``src.device``, for reproducible samples
    :return: for each sentence the output ids without EOS
    """

    def draw(logits: torch.Tensor) -> torch.Tensor:  # (B, V) -> (B,)
        logits = logits.float()
        if topk:
            values, indices = logits.topk(min(topk, logits.size(-1)), dim=-1)
            choice = torch.multinomial(F.softmax(values, dim=-1), 1, generator=generator)
            return indices.gather(1, choice).squeeze(1)
        return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)

    return _one_path_search(model, src, draw, max_len_a, max_len_b)


def _one_path_search(
    model: DecodingModel, src: torch.Tensor, choose, max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """Extend one hypothesis per sentence with ``choose(logits (B, V)) -> (B,)`` until EOS or the limit."""
    B = src.size(0)
    limit = max_output_lengths(src, max_len_a, max_len_b)
    state = model.init_state(src)
    prev = src.new_full((B,), BOS)
    outputs = src.new_full((B, int(limit.max())), PAD)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for t in range(outputs.size(1)):
        logits, state = model.step(prev, state)
        prev = choose(logits)
        prev = torch.where(limit <= t + 1, torch.full_like(prev, EOS), prev)  # forced end at the limit
        outputs[:, t] = prev.masked_fill(done, PAD)
        done |= prev == EOS
        if bool(done.all()):
            break
    return [_strip(row) for row in outputs.tolist()]


def _strip(ids: list[int]) -> list[int]:
    return ids[: ids.index(EOS)] if EOS in ids else [i for i in ids if i != PAD]


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, section 7)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: DecodingModel,
    src: torch.Tensor,
    beam_size: int = 5,
    alpha: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
) -> list[list[int]]:
    """Batched beam search with length normalisation.

    Each step expands every live hypothesis, keeps 2K candidates per sentence, moves candidates
    ending in EOS among the best K to the sentence's finished list, and continues with the K
    best others. A sentence leaves the batch (its state rows are dropped) once it has K finished
    hypotheses, so the work shrinks as sentences finish.

    :param src: source ids (B, S) with EOS, right-padded
    :param alpha: length penalty exponent; 0 ranks by raw log-probability
    :return: for each sentence the best output ids without EOS
    """
    B, K = src.size(0), beam_size
    device = src.device
    limit = max_output_lengths(src, max_len_a, max_len_b).repeat_interleave(K)  # (B*K,)
    state = reorder_state(model.init_state(src), torch.arange(B, device=device).repeat_interleave(K))
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    scores = scores.view(-1)
    tokens = src.new_full((B * K, 1), BOS)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    active = list(range(B))  # original sentence index of each active block of K rows
    t = 0
    while active:
        logits, state = model.step(tokens[:, -1], state)
        lprobs = F.log_softmax(logits.float(), dim=-1)  # (n*K, V)
        V = lprobs.size(-1)
        at_limit = limit <= t + 1
        if bool(at_limit.any()):
            eos_only = torch.full_like(lprobs[0], float("-inf"))
            eos_only[EOS] = 0.0
            lprobs = torch.where(at_limit[:, None], eos_only, lprobs)
        n = len(active)
        cand = (scores[:, None] + lprobs).view(n, K * V)
        top_scores, top_idx = cand.topk(2 * K, dim=1)  # (n, 2K)
        beam, tok = top_idx // V, top_idx % V
        is_eos = tok == EOS
        rows = torch.arange(n, device=device)[:, None] * K + beam  # (n, 2K) row of the parent
        eos_first = (is_eos[:, :K] & torch.isfinite(top_scores[:, :K])).nonzero().tolist()
        prefixes = tokens[:, 1:].tolist() if eos_first else None
        for i, j in eos_first:
            parent = int(rows[i, j])
            hyp = prefixes[parent]
            finished[active[i]].append((float(top_scores[i, j]) / length_penalty(len(hyp) + 1, alpha), hyp))
        keep_scores, sel = top_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (n, K)
        parents = rows.gather(1, sel).view(-1)
        tokens = torch.cat([tokens.index_select(0, parents), tok.gather(1, sel).view(-1, 1)], dim=1)
        scores = keep_scores.view(-1)
        limit = limit.index_select(0, parents)
        state = reorder_state(state, parents)
        t += 1
        # A sentence is done with K finished hypotheses, or at its length limit (all its beams ended).
        open_rows = (limit > t).view(n, K).any(dim=1).tolist()
        still = [i for i, b in enumerate(active) if len(finished[b]) < K and open_rows[i]]
        if len(still) < n:
            keep = torch.tensor([i * K + k for i in still for k in range(K)], dtype=torch.long, device=device)
            tokens, scores, limit = tokens[keep], scores[keep], limit[keep]
            state = reorder_state(state, keep)
            active = [active[i] for i in still]
    return [max(f, key=lambda x: x[0])[1] if f else [] for f in finished]
