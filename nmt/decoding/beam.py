"""Beam search over the decoder contract of :mod:`nmt.models.seq2seq`, with n-best lists: GNMT's length normalisation
with an exact stopping rule, or CTranslate2's rules, so that CTranslate2 runs the same search.

It generates what every search generates (:mod:`nmt.decoding.search`): no PAD or BOS, and no empty output for a
non-empty source.

Legend: B batch, K beam size, V vocabulary, S source length.
"""

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from nmt.decoding.search import NEVER_GENERATED, ban, is_nonempty, max_output_lengths
from nmt.models.decoding_state import map_tensors
from nmt.models.seq2seq import DecodingModel
from nmt.vocab import BOS, EOS


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length normalisation ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, section 7)."""
    return ((5.0 + length) / 6.0) ** alpha


STOP_RULES = ("exact", "first_k", "never")
# How beam search scores the EOS it forces at the length limit (nmt.config.DecodeConfig.eos_at_limit).
EOS_AT_LIMIT = ("charged", "free")
# Whose beam search: GNMT's length normalisation, or CTranslate2's (nmt.config.DecodeConfig.length_normalization).
NORMALIZATIONS = ("gnmt", "ctranslate2")


class Hypothesis(NamedTuple):
    """A finished hypothesis: output ids without EOS, its ranking score and its log-probability."""

    ids: list[int]
    score: float  # logprob / the length penalty of its positions (len(ids) + 1, or len(ids) without EOS): its rank
    logprob: float  # sum of the log-probabilities of ids and EOS (none where the limit ended it without, or freed it)


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
    normalization: str = "gnmt",
) -> list[list[int]]:
    """Batched beam search with length normalisation: for each sentence the best output ids without EOS.

    See :func:`beam_search_nbest`, of which this is the case ``nbest=1``.
    """
    nbest = beam_search_nbest(
        model, src, beam_size, alpha, max_len_a, max_len_b, stop, eos_at_limit=eos_at_limit, normalization=normalization
    )
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
    normalization: str = "gnmt",
) -> list[list[Hypothesis]]:
    """Batched beam search with length normalisation, keeping the ``nbest`` best finished hypotheses.

    Each step expands every live hypothesis, keeps 2K candidates per sentence, offers candidates
    ending in EOS among the best K to the sentence's ``nbest`` best finished hypotheses, and continues
    with the K best others. A sentence leaves the batch (its state rows are dropped) when it is done
    (:func:`_is_done`), so the work shrinks as sentences finish.

    ``normalization="gnmt"`` divides a hypothesis's log-probability by ((5 + |Y|) / 6) ** alpha, |Y| counting EOS. A
    sentence is done when ``stop`` says so, or at its length limit, where a hypothesis can only end: EOS is forced
    there (and scored by ``eos_at_limit``).

    ``normalization="ctranslate2"`` is CTranslate2's beam search (``translate_batch`` with ``length_penalty`` alpha,
    ``patience`` 1, ``min_decoding_length`` 1), so that CTranslate2 can run this search: each step's
    log-probabilities are renormalised over the tokens it may generate (CTranslate2 bans tokens in the logits), a
    hypothesis's log-probability is divided by |Y| ** alpha, |Y| counting EOS, and a sentence is done once K
    hypotheses have finished (alpha 0: once the best candidate of a step ended and ``nbest`` have finished), or at
    its last step, one before our limit (CTranslate2's ``max_decoding_length`` leaves EOS out): there each of the K
    best candidates ends as it is, its token kept, no EOS added. ``stop`` and ``eos_at_limit`` are GNMT's only.

    :param src: source ids (B, S) with EOS, right-padded
    :param alpha: length penalty exponent; 0 ranks by raw log-probability
    :param stop: ``"exact"`` (the result of ``"never"``, usually after far fewer steps), ``"first_k"`` (as fairseq)
        or ``"never"``: see :func:`_is_done`
    :param nbest: finished hypotheses kept per sentence, at most ``beam_size``
    :param eos_at_limit: ``"charged"``: the EOS forced at the length limit adds its log-probability, as fairseq,
        Marian and OpenNMT-py score it, so a hypothesis cut in the middle of a loop (where the model gives EOS little
        mass) does not beat one that ended; ``"free"``: it adds nothing, as CTranslate2 scores a hypothesis stopped
        at its ``max_decoding_length`` (benchmarks/history.md, "Speed against the peers: earlier rounds")
    :param normalization: ``"gnmt"`` or ``"ctranslate2"``
    :return: for each sentence up to ``nbest`` hypotheses, best first (fewer only if fewer finished)
    """
    _check_beam_options(beam_size, stop, nbest, eos_at_limit, normalization)
    rules = BeamRules(normalization == "ctranslate2", eos_at_limit == "free", alpha, beam_size, nbest, stop)
    K = beam_size
    beams = _Beams.start(src, max_output_lengths(src, max_len_a, max_len_b), rules)
    state = model.init_state(src)  # one row per sentence until the first step: its K beams are one
    fixed: dict[int, torch.Tensor] = {}  # tensors equal over each sentence's K rows: those no step has replaced
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    t = 0
    while beams.active:
        last = beams.limit <= t + (2 if rules.ct2 else 1)  # (n,) gnmt: EOS forced now; ctranslate2: its last step
        if t == 0:
            lprobs, state = _first_step(model, src, state, last, rules)
            fixed = _tensors(state)
        else:
            forced = None if rules.ct2 else last.repeat_interleave(K)
            lprobs, state = _next_lprobs(model, beams.tokens[:, -1], state, forced, None, rules)  # (n*K, V)
            fixed = {i: x for i, x in _tensors(state).items() if i in fixed}
        top_scores, tok, rows = _top_candidates(lprobs, beams.scores, K)  # (n, 2K) each
        del lprobs  # megabytes: not to be held through the next step
        _finish(finished, beams, top_scores[:, :K], tok[:, :K], rows, t, last, rules)
        beams.tokens, beams.scores, parents = _continue_beams(top_scores, tok, rows, tok == EOS, beams.tokens, K)
        state = _move_beams(state, parents, fixed)
        t += 1
        done = _is_done(rules, last, beams, length_penalty(t + 1, alpha))
        if bool(done.any()):
            still = (~done).nonzero().flatten()
            state, fixed = _select_rows(state, beams.keep(still, K), still, fixed)
    return finished


@dataclass(frozen=True)
class BeamRules:
    """The settings of a beam search that its steps consult (see :func:`beam_search_nbest`)."""

    ct2: bool  # CTranslate2's rules, else GNMT's
    eos_free: bool  # gnmt: the EOS forced at the limit scores 0
    alpha: float
    K: int
    nbest: int
    stop: str  # gnmt


@dataclass
class _Beams:
    """What beam search holds per active sentence: its K live hypotheses, and what tells when it is done."""

    tokens: torch.Tensor  # (n*K, t + 1) the live prefixes, BOS first
    scores: torch.Tensor  # (n*K,) sums of the log-probabilities of the live hypotheses, -inf for dead ones
    limit: torch.Tensor  # (n,) output limit, EOS included (ctranslate2: at least 2, one token and EOS)
    limit_lp: torch.Tensor  # (n,) float64: gnmt's length penalty at the limit, the largest (the exact bound)
    kth_score: torch.Tensor  # (n,) float64: the nbest-th best normalised score, -inf until that many finished
    n_finished: torch.Tensor  # (n,) hypotheses finished so far
    top_ended: torch.Tensor  # (n,) whether the best candidate of a step ended (CTranslate2's rule for alpha 0)
    active: list[int]  # the original sentence index of each active sentence

    @classmethod
    def start(cls, src: torch.Tensor, limit: torch.Tensor, rules: BeamRules) -> "_Beams":
        B, K, device = src.size(0), rules.K, src.device
        float64 = {"dtype": torch.float64, "device": device}
        limit = limit.clamp(min=2) if rules.ct2 else limit  # CTranslate2 ends no output before its first token
        scores = torch.full((B, K), float("-inf"), device=device)
        scores[:, 0] = 0.0  # all beams start identical: keep one alive
        return cls(
            tokens=src.new_full((B * K, 1), BOS),
            scores=scores.view(-1),
            limit=limit,
            limit_lp=torch.tensor([length_penalty(n, rules.alpha) for n in limit.tolist()], **float64),
            kth_score=torch.full((B,), float("-inf"), **float64),
            n_finished=torch.zeros(B, dtype=torch.long, device=device),
            top_ended=torch.zeros(B, dtype=torch.bool, device=device),
            active=list(range(B)),
        )

    def keep(self, still: torch.Tensor, K: int) -> torch.Tensor:
        """Keep the sentences ``still`` (n',) searched; return the rows (n'*K,) of their hypotheses."""
        rows = (still[:, None] * K + torch.arange(K, device=still.device)).view(-1)
        self.tokens, self.scores = self.tokens[rows], self.scores[rows]
        for name in ("limit", "limit_lp", "kth_score", "n_finished", "top_ended"):
            setattr(self, name, getattr(self, name)[still])
        self.active = [self.active[i] for i in still.tolist()]
        return rows


def _finish(
    finished: list[list[Hypothesis]],
    beams: _Beams,
    best: torch.Tensor,
    tok: torch.Tensor,
    rows: torch.Tensor,
    t: int,
    last: torch.Tensor,
    rules: BeamRules,
) -> None:
    """Offer the hypotheses that end at step ``t`` to the sentences' finished ones: of the K best candidates ``best``
    (n, K), of tokens ``tok`` (n, K) and parent ``rows`` (n, >= K), those ending in EOS, and with CTranslate2's rules
    at its ``last`` step (n,) every one, as it is (its token kept, no EOS)."""
    is_eos = tok == EOS
    ends = is_eos | last[:, None] if rules.ct2 else is_eos  # (n, K)
    beams.n_finished += (ends & torch.isfinite(best)).sum(dim=1)
    beams.top_ended |= ends[:, 0]
    # t + 1 positions, of t tokens and EOS (or, at CTranslate2's last step, of t + 1 tokens)
    lp = float(t + 1) ** rules.alpha if rules.ct2 else length_penalty(t + 1, rules.alpha)
    beams.kth_score = _keep_finished(
        finished,
        beams.active,
        beams.kth_score,
        best,
        ends,
        rows,
        beams.tokens,
        lp,
        rules.nbest,
        tok if rules.ct2 else None,
    )


def _first_step(
    model: DecodingModel, src: torch.Tensor, state: Any, last: torch.Tensor, rules: BeamRules
) -> tuple[torch.Tensor, Any]:
    """The first step of beam search, where a sentence's K beams are one: one row per sentence, then K copies.

    :param state: the initial state, one row per sentence (B)
    :param last: whether each sentence's limit ends it at this step (B,)
    :return: log-probabilities (B*K, V), -inf in every row but each sentence's first (whose score is -inf
        anyway), and the state after the step with K rows per sentence (:class:`PerSentence` tensors stay one)
    """
    B, K = src.size(0), rules.K
    # CTranslate2's min_decoding_length bans EOS first for every source; ours, for a non-empty one
    no_eos = torch.ones_like(last) if rules.ct2 else is_nonempty(src)
    forced = None if rules.ct2 else last
    lprobs, state = _next_lprobs(model, src.new_full((B,), BOS), state, forced, no_eos, rules)
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


def _check_beam_options(beam_size: int, stop: str, nbest: int, eos_at_limit: str, normalization: str) -> None:
    """:raises ValueError: on an unknown stopping rule, scoring of EOS at the limit or normalization (or GNMT's rules
    with CTranslate2's), or ``nbest`` outside 1 to ``beam_size``"""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization: {normalization!r} is not one of {', '.join(map(repr, NORMALIZATIONS))}")
    if normalization == "ctranslate2" and (stop, eos_at_limit) != ("exact", "charged"):
        raise ValueError("stop and eos_at_limit are GNMT's rules: normalization 'ctranslate2' has CTranslate2's")
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
    at_limit: torch.Tensor | None,
    no_eos: torch.Tensor | None,
    rules: BeamRules,
) -> tuple[torch.Tensor, Any]:
    """Log-probabilities (n*K, V) of the token after ``prev`` (n*K,), float32; only EOS for rows ``at_limit`` (n*K,).

    PAD and BOS get -inf, and so does EOS in the rows of ``no_eos`` (n*K,) (see :func:`ban`). With GNMT's rules the
    others keep the model's log-probabilities, not renormalised (as fairseq's), and in the rows ``at_limit`` EOS keeps
    its own log-probability, as fairseq charges it there (even where ``no_eos`` would ban it: the end is forced), or
    with ``eos_free`` gets 0, as CTranslate2 stops at ``max_decoding_length`` without charging an end. With
    CTranslate2's, which bans tokens in the logits, the others' are renormalised, and ``at_limit`` is None.

    :return: the log-probabilities and the decoder state after ``prev``
    """
    logits, state = model.step(prev, state)
    if rules.ct2:
        return log_softmax_(ban(logits.float(), NEVER_GENERATED, no_eos)), state
    lprobs = log_softmax_(logits.float())
    forced = None  # (n*K,) what the EOS forced at the limit scores, taken before a ban of EOS
    if bool(at_limit.any()):
        forced = torch.zeros_like(lprobs[:, EOS]) if rules.eos_free else lprobs[:, EOS].clone()
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
    ends: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    lp: float,
    nbest: int,
    tok: torch.Tensor | None = None,
) -> torch.Tensor:
    """Add the hypotheses finishing now that beat a sentence's ``nbest``-th best; return the new ``kth_score``.

    :param eos_scores: log-probabilities of the K best candidates (n, K), sorted best first
    :param ends: whether each candidate ends now (n, K)
    :param rows: row in ``tokens`` of each candidate's parent (n, >= K)
    :param tokens: the live prefixes (n*K, t + 1), BOS first
    :param lp: the length penalty of every hypothesis finishing now (t tokens plus EOS, or t + 1 tokens)
    :param tok: the candidates' tokens (n, K), kept in the output where not EOS (CTranslate2's last step)
    :return: the ``nbest``-th best normalised score of each sentence (n,), float64, -inf until that many finished
    """
    normalised = eos_scores.double().masked_fill(~ends, float("-inf")) / lp  # (n, K)
    i_idx, j_idx = (normalised > kth_score[:, None]).nonzero(as_tuple=True)
    if not len(i_idx):
        return kth_score
    prefixes = tokens[rows[i_idx, j_idx], 1:].tolist()
    if tok is not None:
        prefixes = [p if x == EOS else [*p, x] for p, x in zip(prefixes, tok[i_idx, j_idx].tolist(), strict=True)]
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


def _is_done(rules: BeamRules, last: torch.Tensor, beams: _Beams, next_lp: float) -> torch.Tensor:
    """Which of the n active sentences are done, shape (n,): at their ``last`` step (n,), or by a rule.

    CTranslate2's: once K hypotheses have finished (its ``patience`` 1), or with alpha 0 once the best candidate of
    a step ended and ``nbest`` have finished (no later hypothesis can beat it). GNMT's, by ``stop``:

    - ``"exact"``: when no live hypothesis can still beat the ``nbest``-th best finished one.
      Log-probabilities are never positive, so a live hypothesis's normalised score can at most
      reach its current score divided by the largest length penalty it can still reach (at its
      length limit for ``alpha >= 0``). The result is the one of ``"never"``, usually after far fewer steps.
    - ``"first_k"``: once K hypotheses have finished, as fairseq does; a live hypothesis may
      still have beaten them. Kept to measure what the exact rule costs and gains.
    - ``"never"``: only at the length limit.

    :param beams: the live hypotheses' scores (-inf for dead ones), the nbest-th best finished normalised score
        (-inf until nbest finished), GNMT's length penalty at the limit, the finished count
    :param next_lp: GNMT's length penalty of the shortest hypothesis still reachable (EOS at the next step)
    """
    if rules.ct2 and rules.alpha == 0:
        return last | (beams.top_ended & (beams.n_finished >= rules.nbest))
    if rules.ct2 or rules.stop == "first_k":
        return last | (beams.n_finished >= rules.K)
    if rules.stop == "never":
        return last
    # lp is monotone in the length: the largest reachable one is at an end of [next step, limit]
    largest_lp = beams.limit_lp.clamp(min=next_lp)
    bound = (beams.scores.view(-1, rules.K).double() / largest_lp[:, None]).max(dim=1).values  # (n,)
    return last | (beams.kth_score >= bound)
