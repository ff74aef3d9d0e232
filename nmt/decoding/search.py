"""Greedy, sampling and beam search over the decoder contract of :mod:`nmt.models.seq2seq` (no architecture branches).

Every search, as fairseq's: PAD and BOS are never generated, nor UNK when sampling (a label-smoothed model gives it
mass, which shows as "⁇" in synthetic sources), and a non-empty source never gets an empty output (EOS cannot
come first: minimum output length 1).

Legend: B batch, K beam size, V vocabulary, S source length.
"""

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from nmt.models.decoding_state import map_tensors, reorder_state
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


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, section 7)."""
    return ((5.0 + length) / 6.0) ** alpha


STOP_RULES = ("exact", "first_k", "never")
# How beam search scores the EOS it forces at the length limit (nmt.config.DecodeConfig.eos_at_limit).
EOS_AT_LIMIT = ("charged", "free")


class Hypothesis(NamedTuple):
    """A finished hypothesis: output ids without EOS, its ranking score and its log-probability."""

    ids: list[int]
    score: float  # log-probability / length_penalty(len(ids) + 1, alpha), what the beam ranks by
    logprob: float  # sum of the log-probabilities of ids and EOS (EOS forced at the limit: 0 if eos_at_limit "free")


@torch.no_grad()
def beam_search(
    model: DecodingModel,
    src: torch.Tensor,
    beam_size: int = 5,
    alpha: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    stop: str = "exact",
    eos_at_limit: str = "charged",
) -> list[list[int]]:
    """Batched beam search with length normalisation: for each sentence the best output ids without EOS.

    See :func:`beam_search_nbest`, of which this is the case ``nbest=1``.
    """
    nbest = beam_search_nbest(model, src, beam_size, alpha, max_len_a, max_len_b, stop, eos_at_limit=eos_at_limit)
    return [hyps[0].ids if hyps else [] for hyps in nbest]


@torch.no_grad()
def beam_search_nbest(
    model: DecodingModel,
    src: torch.Tensor,
    beam_size: int = 5,
    alpha: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    stop: str = "exact",
    nbest: int = 1,
    eos_at_limit: str = "charged",
) -> list[list[Hypothesis]]:
    """Batched beam search with length normalisation, keeping the ``nbest`` best finished hypotheses.

    Each step expands every live hypothesis, keeps 2K candidates per sentence, offers candidates
    ending in EOS among the best K to the sentence's ``nbest`` best finished hypotheses, and continues
    with the K best others. A sentence leaves the batch (its state rows are dropped) when ``stop`` says
    so (:func:`_is_done`), or at its length limit, so the work shrinks as sentences finish. At its length limit a
    hypothesis can only end: EOS is forced there.

    :param src: source ids (B, S) with EOS, right-padded
    :param alpha: length penalty exponent; 0 ranks by raw log-probability
    :param stop: ``"exact"`` (the result of ``"never"``, usually after far fewer steps), ``"first_k"`` (as fairseq)
        or ``"never"``: see :func:`_is_done`
    :param nbest: finished hypotheses kept per sentence, at most ``beam_size``
    :param eos_at_limit: ``"charged"``: the EOS forced at the length limit adds its log-probability, as fairseq,
        Marian and OpenNMT-py score it, so a hypothesis cut in the middle of a loop (where the model gives EOS little
        mass) does not beat one that ended; ``"free"``: it adds nothing, as CTranslate2 scores a hypothesis stopped
        at its ``max_decoding_length`` (benchmarks/README.md, "small")
    :return: for each sentence up to ``nbest`` hypotheses, best first (fewer only if fewer finished)
    """
    _check_beam_options(beam_size, stop, nbest, eos_at_limit)
    eos_free = eos_at_limit == "free"
    B, K = src.size(0), beam_size
    device = src.device
    limit = max_output_lengths(src, max_len_a, max_len_b)  # (n,) for the n active sentences
    # the largest length penalty at the limit, in float64 like the finished scores, for the bound
    limit_lp = torch.tensor([length_penalty(n, alpha) for n in limit.tolist()], dtype=torch.float64, device=device)
    state = model.init_state(src)  # one row per sentence until the first step: its K beams are one
    fixed: dict[int, torch.Tensor] = {}  # tensors equal over each sentence's K rows: those no step has replaced
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep one alive
    scores = scores.view(-1)  # (n*K,) sum of log-probabilities of the live hypotheses
    tokens = src.new_full((B * K, 1), BOS)
    kth_score = torch.full((B,), float("-inf"), dtype=torch.float64, device=device)  # (n,) nbest-th best, normalised
    n_finished = torch.zeros(B, dtype=torch.long, device=device)  # (n,)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    active = list(range(B))  # original sentence index of each active block of K rows
    t = 0
    while active:
        at_limit = (limit <= t + 1).repeat_interleave(K)  # (n*K,)
        if t == 0:
            lprobs, state = _first_step(model, src, state, at_limit[::K], K, eos_free)
            fixed = _tensors(state)
        else:
            lprobs, state = _next_lprobs(model, tokens[:, -1], state, at_limit, None, eos_free)  # (n*K, V)
            fixed = {i: x for i, x in _tensors(state).items() if i in fixed}
        top_scores, tok, rows = _top_candidates(lprobs, scores, K)  # (n, 2K) each
        del lprobs  # megabytes: not to be held through the next step
        is_eos = tok == EOS
        best, best_eos = top_scores[:, :K], is_eos[:, :K]  # (n, K) the K best candidates
        n_finished += (best_eos & torch.isfinite(best)).sum(dim=1)
        lp = length_penalty(t + 1, alpha)  # of the hypotheses finishing now
        kth_score = _keep_finished(finished, active, kth_score, best, best_eos, rows, tokens, lp, nbest)
        tokens, scores, parents = _continue_beams(top_scores, tok, rows, is_eos, tokens, K)
        state = _move_beams(state, parents, fixed)
        t += 1
        done = _is_done(
            stop, limit <= t, scores.view(-1, K), kth_score, limit_lp, length_penalty(t + 1, alpha), n_finished, K
        )
        if bool(done.any()):
            still = (~done).nonzero().flatten()
            keep = (still[:, None] * K + torch.arange(K, device=device)).view(-1)
            tokens, scores = tokens[keep], scores[keep]
            limit, limit_lp, kth_score, n_finished = limit[still], limit_lp[still], kth_score[still], n_finished[still]
            state, fixed = _select_rows(state, keep, still, fixed)
            active = [active[i] for i in still.tolist()]
    return finished


def _first_step(
    model: DecodingModel, src: torch.Tensor, state: Any, at_limit: torch.Tensor, K: int, eos_free: bool
) -> tuple[torch.Tensor, Any]:
    """The first step of beam search, where a sentence's K beams are one: one row per sentence, then K copies.

    :param state: the initial state, one row per sentence (B)
    :param at_limit: whether each sentence's limit is 1 (B,)
    :param eos_free: the EOS forced at the limit scores 0 (see :func:`_next_lprobs`)
    :return: log-probabilities (B*K, V), -inf in every row but each sentence's first (whose score is -inf
        anyway), and the state after the step with K rows per sentence (:class:`PerSentence` tensors stay one)
    """
    B = src.size(0)
    lprobs, state = _next_lprobs(model, src.new_full((B,), BOS), state, at_limit, is_nonempty(src), eos_free)
    lprobs = torch.cat([lprobs[:, None], lprobs.new_full((B, K - 1, lprobs.size(-1)), float("-inf"))], dim=1)
    rows = torch.arange(B, device=src.device).repeat_interleave(K)
    return lprobs.view(B * K, -1), map_tensors(state, lambda x: x.index_select(0, rows), lambda x: x)


def _top_candidates(
    lprobs: torch.Tensor, scores: torch.Tensor, K: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence's 2K best extensions by one token of its K live hypotheses.

    :param lprobs: log-probabilities of the next token (n*K, V), this step's own tensor: ``scores`` are added in place
    :param scores: the sums of the log-probabilities of the live hypotheses (n*K,)
    :return: the candidates' sums (n, 2K), best first, their tokens (n, 2K) and the rows of their parents (n, 2K)
    """
    V = lprobs.size(-1)
    n = lprobs.size(0) // K
    top_scores, top_idx = lprobs.add_(scores[:, None]).view(n, K * V).topk(2 * K, dim=1)  # (n, 2K)
    rows = torch.arange(n, device=lprobs.device)[:, None] * K + top_idx // V
    return top_scores, top_idx % V, rows


def _continue_beams(
    top_scores: torch.Tensor, tok: torch.Tensor, rows: torch.Tensor, is_eos: torch.Tensor, tokens: torch.Tensor, K: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The K best candidates of each sentence that do not end in EOS, the live hypotheses of the next step.

    :param top_scores: and ``tok``, ``rows``, ``is_eos``: the candidates (n, 2K) of :func:`_top_candidates`
    :param tokens: the live prefixes (n*K, t + 1), BOS first
    :return: the new prefixes (n*K, t + 2), their scores (n*K,) and the rows of their parents (n*K,)
    """
    keep_scores, sel = top_scores.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (n, K)
    parents = rows.gather(1, sel).view(-1)
    tokens = torch.cat([tokens.index_select(0, parents), tok.gather(1, sel).view(-1, 1)], dim=1)
    return tokens, keep_scores.view(-1), parents


def _tensors(state: Any) -> dict[int, torch.Tensor]:
    """The tensors of ``state`` by ``id``; the dict keeps them alive, so no new tensor can reuse an id in it."""
    found: dict[int, torch.Tensor] = {}
    map_tensors(state, lambda x: found.setdefault(id(x), x))
    return found


def _move_beams(state: Any, parents: torch.Tensor, fixed: dict[int, torch.Tensor]) -> Any:
    """:func:`reorder_state` by ``parents``, which move rows within sentences only, except the ``fixed`` tensors.

    Those (the encoder output, cross-attention keys and values, source mask) are equal over each
    sentence's rows, so the move would copy them unchanged, megabytes a step (benchmarks/README.md,
    "Measurements behind the code").
    """
    return map_tensors(state, lambda x: x if id(x) in fixed else x.index_select(0, parents), lambda x: x)


def _select_rows(
    state: Any, rows: torch.Tensor, sentences: torch.Tensor, fixed: dict[int, torch.Tensor]
) -> tuple[Any, dict[int, torch.Tensor]]:
    """``state`` with the hypotheses ``rows`` of the sentences still searched, ``sentences`` (their
    :class:`~nmt.models.decoding_state.PerSentence` rows), and the tensors of the result that come from ``fixed``'s."""
    selected: dict[int, torch.Tensor] = {}

    def select(index: torch.Tensor):
        def select_rows(x: torch.Tensor) -> torch.Tensor:
            y = x.index_select(0, index)
            if id(x) in fixed:
                selected[id(y)] = y
            return y

        return select_rows

    return map_tensors(state, select(rows), select(sentences)), selected


def _check_beam_options(beam_size: int, stop: str, nbest: int, eos_at_limit: str) -> None:
    """:raises ValueError: on an unknown stopping rule or scoring of EOS at the limit, or ``nbest`` outside 1 to
    ``beam_size``"""
    if stop not in STOP_RULES:
        raise ValueError(f"stop: {stop!r} is not one of {', '.join(map(repr, STOP_RULES))}")
    if eos_at_limit not in EOS_AT_LIMIT:
        raise ValueError(f"eos_at_limit: {eos_at_limit!r} is not one of {', '.join(map(repr, EOS_AT_LIMIT))}")
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest: must be between 1 and the beam size {beam_size}, got {nbest}")


def _next_lprobs(
    model: DecodingModel,
    prev: torch.Tensor,
    state: Any,
    at_limit: torch.Tensor,
    no_eos: torch.Tensor | None,
    eos_free: bool,
) -> tuple[torch.Tensor, Any]:
    """Log-probabilities (n*K, V) of the token after ``prev`` (n*K,), float32; only EOS for rows ``at_limit`` (n*K,).

    PAD and BOS get -inf, and so does EOS in the rows of ``no_eos`` (n*K,) (see :func:`ban`); the others keep
    the model's log-probabilities, not renormalised (as fairseq's). In the rows ``at_limit`` EOS keeps its own
    log-probability, as fairseq charges it there (even where ``no_eos`` would ban it: the end is forced), or with
    ``eos_free`` gets 0, as CTranslate2 stops at ``max_decoding_length`` without charging an end.

    :return: the log-probabilities and the decoder state after ``prev``
    """
    logits, state = model.step(prev, state)
    lprobs = log_softmax_(logits.float())
    forced = None  # (n*K,) what the EOS forced at the limit scores, taken before a ban of EOS
    if bool(at_limit.any()):
        forced = torch.zeros_like(lprobs[:, EOS]) if eos_free else lprobs[:, EOS].clone()
    ban(lprobs, NEVER_GENERATED, no_eos)  # (n*K, V)
    if forced is not None:  # forced end at the length limit
        eos = lprobs.masked_fill_(at_limit[:, None], float("-inf"))[:, EOS]
        eos.copy_(torch.where(at_limit, forced, eos))
    return lprobs, state


def log_softmax_(logits: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)`` over the last dimension, computed in ``logits`` (which it returns).

    In place, as every step's logits are the search's own (:class:`~nmt.models.seq2seq.DecodingModel`): a beam
    step then holds one (n*K, V) tensor instead of two, megabytes at the peak of a decoding process. Each row's
    maximum and sum are taken before it is written, so the result equals ``F.log_softmax``'s bit for bit.
    """
    return torch.log_softmax(logits, dim=-1, out=logits)


def _keep_finished(
    finished: list[list[Hypothesis]],
    active: list[int],
    kth_score: torch.Tensor,
    eos_scores: torch.Tensor,
    is_eos: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    lp: float,
    nbest: int,
) -> torch.Tensor:
    """Add the hypotheses finishing now that beat a sentence's ``nbest``-th best; return the new ``kth_score``.

    :param eos_scores: log-probabilities of the K best candidates (n, K), sorted best first
    :param is_eos: whether each candidate ends in EOS (n, K)
    :param rows: row in ``tokens`` of each candidate's parent (n, >= K)
    :param tokens: the live prefixes (n*K, t + 1), BOS first
    :param lp: the length penalty of every hypothesis finishing now (t tokens plus EOS)
    :return: the ``nbest``-th best normalised score of each sentence (n,), float64, -inf until that many finished
    """
    normalised = eos_scores.double().masked_fill(~is_eos, float("-inf")) / lp  # (n, K)
    i_idx, j_idx = (normalised > kth_score[:, None]).nonzero(as_tuple=True)
    if not len(i_idx):
        return kth_score
    prefixes = tokens[rows[i_idx, j_idx], 1:].tolist()
    found = zip(
        i_idx.tolist(), prefixes, normalised[i_idx, j_idx].tolist(), eos_scores[i_idx, j_idx].tolist(), strict=True
    )
    kth = kth_score.tolist()
    for i, hyp, score, logprob in found:
        if score <= kth[i]:  # an earlier candidate of this step raised the bar (candidates come best first)
            continue
        kept = finished[active[i]]
        kept.append(Hypothesis(hyp, score, logprob))
        kept.sort(key=lambda h: -h.score)  # stable: of equal scores the earlier finished stays first
        del kept[nbest:]
        if len(kept) == nbest:
            kth[i] = kept[-1].score
    return torch.tensor(kth, dtype=torch.float64, device=kth_score.device)


def _is_done(
    stop: str,
    at_limit: torch.Tensor,
    live: torch.Tensor,
    best: torch.Tensor,
    limit_lp: torch.Tensor,
    next_lp: float,
    n_finished: torch.Tensor,
    K: int,
) -> torch.Tensor:
    """Which of the n active sentences are done, shape (n,): at their length limit, or by the rule ``stop``.

    - ``"exact"``: when no live hypothesis can still beat the ``nbest``-th best finished one.
      Log-probabilities are never positive, so a live hypothesis's normalised score can at most
      reach its current score divided by the largest length penalty it can still reach (at its
      length limit for ``alpha >= 0``). The result is the one of ``"never"``, usually after far fewer steps.
    - ``"first_k"``: once K hypotheses have finished, as fairseq does; a live hypothesis may
      still have beaten them. Kept to measure what the exact rule costs and gains.
    - ``"never"``: only at the length limit.

    :param at_limit: whether the sentence reached its length limit (n,)
    :param live: scores of the live hypotheses (n, K), -inf for dead ones
    :param best: the nbest-th best finished normalised score (n,), float64, -inf until nbest finished
    :param limit_lp: length penalty at the sentence's limit (n,), float64
    :param next_lp: length penalty of the shortest hypothesis still reachable (EOS at the next step)
    :param n_finished: hypotheses finished so far (n,)
    """
    if stop == "never":
        return at_limit
    if stop == "first_k":
        return at_limit | (n_finished >= K)
    # lp is monotone in the length: the largest reachable one is at an end of [next step, limit]
    largest_lp = limit_lp.clamp(min=next_lp)
    bound = (live.double() / largest_lp[:, None]).max(dim=1).values  # (n,)
    return at_limit | (best >= bound)
