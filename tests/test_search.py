"""Greedy, sampling and beam search through the decoder contract."""

import weakref

import pytest
import torch
from conftest import ARCHS, stepwise_logits, tiny_model

from nmt.decoding.beam import beam_search, beam_search_nbest, length_penalty, log_softmax_
from nmt.decoding.search import greedy_search, max_output_lengths, sample_search
from nmt.models.decoding_state import PerSentence
from nmt.vocab import BOS, EOS, PAD, UNK

V = 40


def sources(B=6, S=9, seed=0, vocab=V):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (B, S), generator=g)
    src[:, -1] = EOS
    src[0, 5:] = PAD
    src[0, 4] = EOS
    return src


@torch.no_grad()
def sequence_logprob(model, src_row, hyp, eos=True):
    """Log-probability of ``hyp`` + EOS (or of ``hyp`` alone) under the model, by teacher forcing."""
    trg = torch.tensor([[BOS, *hyp]])
    lprobs = torch.log_softmax(model(src_row[None], trg), dim=-1)[0]
    token_lprobs = lprobs.gather(1, torch.tensor([*hyp, EOS])[:, None])[:, 0]
    return float(token_lprobs.sum() if eos else token_lprobs[:-1].sum())


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_size_one_equals_greedy(arch):
    model = tiny_model(arch, V)
    src = sources()
    assert beam_search(model, src, beam_size=1, alpha=0.0) == greedy_search(model, src)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("beam_size", [2, 5])
@pytest.mark.parametrize("arch", ARCHS)
def test_stopping_early_returns_what_searching_to_the_limit_returns(arch, beam_size, alpha):
    """The exact stopping rule never drops a live hypothesis that could still win.

    A vocabulary of 6 makes EOS likely, so sentences finish at many lengths. Stopping once K
    hypotheses have finished (fairseq's rule, and ours before) fails this for the Transformer
    with seeds 0, 2, 3 and 5; untrained RNN and ConvS2S models are too flat to show the difference.
    """
    for seed in range(6):
        model = tiny_model(arch, 6, seed=seed)
        src = sources(B=8, seed=seed, vocab=6)
        exhaustive = beam_search(model, src, beam_size, alpha, stop="never")
        assert beam_search(model, src, beam_size, alpha) == exhaustive, f"seed {seed}"


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("arch", ARCHS)
def test_nbest_stopping_early_returns_what_searching_to_the_limit_returns(arch, alpha):
    """With n-best lists a sentence is done only when its n-th best finished one beats every live bound."""
    for seed in range(6):
        model = tiny_model(arch, 6, seed=seed)
        src = sources(B=8, seed=seed, vocab=6)
        exhaustive = beam_search_nbest(model, src, 4, alpha, stop="never", nbest=3)
        assert beam_search_nbest(model, src, 4, alpha, nbest=3) == exhaustive, f"seed {seed}"


@pytest.mark.parametrize("arch", ARCHS)
def test_nbest_lists(arch):
    """N distinct hypotheses, best first, the first the 1-best; scores are what the model gives them."""
    model = tiny_model(arch, V)
    src = sources()
    nbest = beam_search_nbest(model, src, beam_size=5, alpha=1.0, nbest=3)
    assert [hyps[0].ids for hyps in nbest] == beam_search(model, src, beam_size=5, alpha=1.0)
    for row, hyps in zip(src, nbest, strict=True):
        assert len(hyps) == 3 and len({tuple(h.ids) for h in hyps}) == 3
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:  # EOS included, also where it was forced at the limit (test_eos_forced_at_the_limit_...)
            assert h.logprob == pytest.approx(sequence_logprob(model, row, h.ids), abs=1e-4)
            assert h.score == pytest.approx(h.logprob / length_penalty(len(h.ids) + 1, 1.0))


@pytest.mark.parametrize("eos_at_limit", ["charged", "free"])
@pytest.mark.parametrize("arch", ARCHS)
def test_eos_forced_at_the_limit_scores_by_the_rule(arch, eos_at_limit):
    """A hypothesis cut at its limit pays the log-probability of the EOS forced there (``charged``, as fairseq), or
    scores its tokens only (``free``, as CTranslate2 scores one stopped at its ``max_decoding_length``:
    benchmarks/history.md, "small at 256 wide: the former default", the equal-work comparison); one that ends before
    pays for its EOS either way."""
    model = tiny_model(arch, V)
    src = sources()
    nbest = beam_search_nbest(
        model, src, beam_size=4, alpha=0.0, max_len_a=0.0, max_len_b=3, nbest=4, eos_at_limit=eos_at_limit
    )
    at_limit = 0
    for row, hyps in zip(src, nbest, strict=True):
        for h in hyps:
            with_eos = sequence_logprob(model, row, h.ids)
            if len(h.ids) == 2 and eos_at_limit == "free":  # the limit: 3 tokens, EOS included
                assert h.logprob == pytest.approx(sequence_logprob(model, row, h.ids, eos=False), abs=1e-4)
                assert h.logprob > with_eos
            else:
                assert h.logprob == pytest.approx(with_eos, abs=1e-4)
            at_limit += len(h.ids) == 2
    assert at_limit >= src.size(0)


A = 5  # the token the looping decoder repeats


class Bigram:
    """A decoder whose next token depends on the previous one alone: ``lprobs[prev]`` (V,) after ``prev``."""

    training = False
    spec = {"config": {}}  # no position limit (nmt.decoding.translation.position_limit)

    def __init__(self, lprobs: torch.Tensor) -> None:
        self.lprobs = lprobs  # (V, V)

    def init_state(self, src):
        return {}

    def step(self, trg_prev, state):
        return self.lprobs[trg_prev], state  # (B, V), a tensor of its own

    def train(self, mode=True):
        return self

    def eval(self):
        return self


def looping_decoder() -> Bigram:
    """After BOS the token A; after A, A again (0.6) rather than EOS (0.3): an output that loops until it is cut."""
    probs = torch.full((V, V), 0.1 / (V - 2))
    probs[BOS] = 0.0
    probs[BOS, A] = 1.0
    probs[A, A], probs[A, EOS] = 0.6, 0.3
    return Bigram(probs.log())


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_eos_forced_at_the_limit_is_charged(alpha):
    """At a limit of 2 tokens and EOS, "A A" cut in its loop would score log 0.6 with a free EOS and beat "A" with
    its EOS (log 0.3); charged (fairseq's, Marian's, OpenNMT-py's rule), it pays EOS's log 0.3 after "A A" and loses.
    The free rule (CTranslate2's) stays as an option."""
    model = looping_decoder()
    src = torch.tensor([[7, 8, EOS]])
    lp = model.lprobs
    charged = beam_search_nbest(model, src, 2, alpha, max_len_a=0.0, max_len_b=3, nbest=2)[0]
    assert [h.ids for h in charged] == [[A], [A, A]]
    assert charged[1].logprob == pytest.approx(float(lp[BOS, A] + lp[A, A] + lp[A, EOS]))
    assert charged[1].score == pytest.approx(charged[1].logprob / length_penalty(3, alpha))
    assert beam_search(model, src, 2, alpha, 0.0, 3) == [[A]]
    free = beam_search_nbest(model, src, 2, alpha, 0.0, 3, nbest=2, eos_at_limit="free")[0]
    assert [h.ids for h in free] == [[A, A], [A]]
    assert free[0].logprob == pytest.approx(float(lp[BOS, A] + lp[A, A]))
    with pytest.raises(ValueError, match="eos_at_limit: 'sometimes' is not one of 'charged', 'free'"):
        beam_search(model, src, 2, alpha, 0.0, 3, eos_at_limit="sometimes")


def test_nbest_larger_than_the_beam():
    with pytest.raises(ValueError, match="nbest: must be between 1 and the beam size 2, got 3"):
        beam_search_nbest(tiny_model("rnn", V), sources(), beam_size=2, nbest=3)


def test_unknown_stopping_rule():
    with pytest.raises(ValueError, match="stop: 'sometimes' is not one of 'exact', 'first_k', 'never'"):
        beam_search(tiny_model("rnn", V), sources(), stop="sometimes")


@pytest.mark.parametrize(("alpha", "max_len_a", "max_len_b"), [(0.0, 1.5, 10), (1.0, 1.5, 10), (1.0, 0.0, 2)])
@pytest.mark.parametrize("arch", ARCHS)
def test_ctranslate2_rules_with_beam_size_one_are_greedy_search(arch, alpha, max_len_a, max_len_b):
    """CTranslate2's last step ends its one candidate as it is, where greedy search's forced EOS follows it (the
    limit 2 ends every output there); the renormalised log-probabilities and the length penalty leave the argmax
    alone."""
    model = tiny_model(arch, V)
    src = sources()
    ours = beam_search(model, src, 1, alpha, max_len_a, max_len_b, normalization="ctranslate2")
    assert ours == greedy_search(model, src, max_len_a, max_len_b)


def test_ctranslate2_rules_leave_no_gnmt_rule_to_set():
    model, src = tiny_model("rnn", V), sources()
    with pytest.raises(ValueError, match="normalization: 'length' is not one of 'gnmt', 'ctranslate2'"):
        beam_search(model, src, normalization="length")
    with pytest.raises(ValueError, match="stop and eos_at_limit are GNMT's rules"):
        beam_search(model, src, eos_at_limit="free", normalization="ctranslate2")


@pytest.mark.parametrize("arch", ARCHS)
def test_outputs_respect_the_length_limit(arch):
    model = tiny_model(arch, V)
    src = sources()
    limit = max_output_lengths(src, 1.0, 2)
    for out in (greedy_search(model, src, 1.0, 2), beam_search(model, src, 4, 1.0, 1.0, 2)):
        assert len(out) == src.size(0)
        for hyp, n in zip(out, limit.tolist(), strict=True):
            assert len(hyp) <= n - 1 and EOS not in hyp and PAD not in hyp


@pytest.mark.parametrize("arch", ARCHS)
def test_beam_result_is_independent_of_the_batch(arch):
    model = tiny_model(arch, V)
    src = sources()
    batched = beam_search(model, src, beam_size=4)
    alone = [beam_search(model, src[i : i + 1], beam_size=4)[0] for i in range(src.size(0))]
    assert batched == alone


class Wrapped:
    """A model behind the decoder contract that passes everything through; the wrappers below change a part."""

    training = False

    def __init__(self, model) -> None:
        self.model = model

    def init_state(self, src):
        return self.model.init_state(src)

    def step(self, trg_prev, state):
        return self.model.step(trg_prev, state)

    def train(self, mode=True):
        return self

    def eval(self):
        return self


class CopiedPerBeam(Wrapped):
    """A Transformer whose per-sentence state (cross-attention keys and values, source mask) beam search copies
    for every hypothesis, as it did before :class:`PerSentence`; records the rows of each step's keys."""

    def __init__(self, model, copy: bool) -> None:
        super().__init__(model)
        self.copy, self.rows = copy, []

    def init_state(self, src):
        state = self.model.init_state(src)
        return {**state, "sentence": state["sentence"].value} if self.copy else state

    def step(self, trg_prev, state):
        if self.copy:
            state = {**state, "sentence": PerSentence(state["sentence"])}
        self.rows.append((trg_prev.size(0), state["sentence"].value["cross"][0][0].size(0)))
        logits, state = self.model.step(trg_prev, state)
        return logits, {**state, "sentence": state["sentence"].value} if self.copy else state


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_search_keeps_cross_attention_once_per_sentence_with_the_same_result(alpha):
    """The K hypotheses of a sentence share its encoder keys and values (a K-th of the memory), and their queries
    attend to them as one block: the result is the one of copying them for every hypothesis."""
    model = tiny_model("transformer", V)
    src = sources(B=8)
    shared, copied = CopiedPerBeam(model, copy=False), CopiedPerBeam(model, copy=True)
    ours, theirs = (beam_search_nbest(m, src, beam_size=4, alpha=alpha, nbest=4) for m in (shared, copied))
    assert [[h.ids for h in hyps] for hyps in ours] == [[h.ids for h in hyps] for hyps in theirs]
    scores = [h.score for hyps in theirs for h in hyps]
    assert [h.score for hyps in ours for h in hyps] == pytest.approx(scores, abs=1e-5)
    assert all(hyps == 4 * keys for hyps, keys in shared.rows[1:])  # a row of keys per sentence, as sentences end
    assert shared.rows[:2] == [(8, 8), (32, 8)] and shared.rows[-1][1] < 8  # the first step: one row per sentence
    assert all(hyps == keys for hyps, keys in copied.rows)


class Recording(Wrapped):
    """A model that records the rows (sentences) of every step."""

    def __init__(self, model) -> None:
        super().__init__(model)
        self.rows = []

    def step(self, trg_prev, state):
        self.rows.append(trg_prev.size(0))
        return self.model.step(trg_prev, state)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_search_drops_finished_sentences_from_the_batch(arch):
    """A sentence leaves the batch when it ends, so each step computes only the sentences still going; each output is
    the one of the sentence searched alone. A vocabulary of 6 makes EOS likely: the sentences end at many lengths."""
    model = tiny_model(arch, 6)
    src = sources(B=8, vocab=6)
    recording = Recording(model)
    batched = greedy_search(recording, src)
    assert batched == [greedy_search(model, src[i : i + 1])[0] for i in range(src.size(0))]
    lengths = [len(hyp) + 1 for hyp in batched]  # steps taken: the output and its EOS
    assert len(set(lengths)) > 1
    assert recording.rows == [sum(n >= t for n in lengths) for t in range(1, max(lengths) + 1)]


class HoldsNoLogits(Wrapped):
    """Records, at each step, whether the logits the previous step returned are still alive."""

    def __init__(self, model) -> None:
        super().__init__(model)
        self.previous, self.held = None, []

    def step(self, trg_prev, state):
        if self.previous is not None:
            self.held.append(self.previous() is not None)
        logits, state = self.model.step(trg_prev, state)
        self.previous = weakref.ref(logits)
        return logits, state


def test_beam_search_frees_each_steps_logits_before_the_next_step():
    """The (n*K, V) scores of a step are megabytes at the peak of a decoding process: not to be held through the
    next step's model call."""
    model = HoldsNoLogits(tiny_model("transformer", V))
    beam_search(model, sources(), beam_size=4, alpha=0.0)
    assert len(model.held) > 2 and not any(model.held)


def test_log_softmax_in_place_equals_log_softmax():
    logits = torch.randn(7, 300) * 5
    expected = torch.log_softmax(logits, dim=-1)
    result = log_softmax_(logits)
    assert result is logits and torch.equal(result, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_wide_beam_scores_at_least_as_well_as_narrow(arch):
    """With alpha=0 the beam ranks by log-probability; a wider beam should never do worse here.

    Sources of seed 3: on those of seed 0 the untrained Transformer's greedy and wide outputs are the same
    (its gain there was the empty output, EOS first, over a greedy path of BOS tokens).
    """
    model = tiny_model(arch, V)
    src = sources(seed=3)
    narrow = beam_search(model, src, beam_size=1, alpha=0.0)
    wide = beam_search(model, src, beam_size=8, alpha=0.0)
    gains = [
        sequence_logprob(model, src[i], w) - sequence_logprob(model, src[i], n)
        for i, (w, n) in enumerate(zip(wide, narrow, strict=True))
    ]
    assert min(gains) >= -1e-4
    assert max(gains) > 0


def test_length_penalty():
    assert length_penalty(1, 1.0) == 1.0
    assert length_penalty(7, 0.0) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)


@pytest.mark.parametrize("arch", ARCHS)
def test_sampling(arch):
    model = tiny_model(arch, V)
    src = sources()

    def draw(topk, seed):
        return sample_search(model, src, topk, torch.Generator().manual_seed(seed))

    assert draw(1, 0) == greedy_search(model, src), "top-1 sampling is greedy search"
    assert draw(0, 7) == draw(0, 7), "the same seed draws the same outputs"
    assert draw(0, 7) != draw(0, 8)


def test_top_k_sampling_draws_only_among_the_k_best():
    model = tiny_model("transformer", V)
    src = sources()
    hyps = sample_search(model, src, 3, torch.Generator().manual_seed(0), max_len_a=2.0)
    for row, hyp in zip(src, hyps, strict=True):
        trg_in = torch.tensor([[BOS, *hyp]])
        logits = stepwise_logits(model, row[None], trg_in)[0]
        logits[:, [PAD, BOS, UNK]] = logits[0, EOS] = float("-inf")  # never sampled; no EOS first
        allowed = logits.topk(3, dim=-1).indices
        assert all(token in allowed[t].tolist() for t, token in enumerate(hyp))


class Favouring(Wrapped):
    """A model whose every step prefers the ``ids`` to any other token, the first most (a decoder that would end
    at once, or a label-smoothed model that spreads mass over UNK and BOS)."""

    def __init__(self, model, ids: list[int]) -> None:
        super().__init__(model)
        self.ids = ids

    def step(self, trg_prev, state):
        logits, state = self.model.step(trg_prev, state)
        bonus = torch.zeros_like(logits)
        bonus[:, self.ids] = torch.arange(len(self.ids), 0, -1, dtype=logits.dtype) * 100.0
        return logits + bonus, state


SEARCHES = {
    "greedy": lambda model, src: greedy_search(model, src),
    "beam": lambda model, src: beam_search(model, src, beam_size=3),
    "nbest": lambda model, src: [h.ids for hyps in beam_search_nbest(model, src, 3, nbest=3) for h in hyps],
    "sample": lambda model, src: sample_search(model, src, 0, torch.Generator().manual_seed(0)),
    "sample_top3": lambda model, src: sample_search(model, src, 3, torch.Generator().manual_seed(0)),
}


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("arch", ARCHS)
def test_no_empty_output_and_never_pad_or_bos(arch, search):
    """A model that prefers EOS, then PAD, then BOS at every step: each search still writes one token first
    (fairseq's minimum length 1), then ends; PAD and BOS are never generated."""
    model = Favouring(tiny_model(arch, V), [EOS, PAD, BOS])
    hyps = SEARCHES[search](model, sources())
    assert hyps and all(len(hyp) == 1 and hyp[0] not in (PAD, BOS, EOS) for hyp in hyps), hyps


@pytest.mark.parametrize("arch", ARCHS)
def test_sampling_never_draws_unk(arch):
    """Sampling from a model that prefers UNK (a label-smoothed reverse model gives it mass) never draws it;
    greedy and beam search may, as fairseq's do (no UNK penalty)."""
    model = Favouring(tiny_model(arch, V), [UNK, BOS])
    for topk in (0, 2):
        hyps = sample_search(model, sources(), topk, torch.Generator().manual_seed(0))
        assert all(hyp and UNK not in hyp and BOS not in hyp for hyp in hyps), hyps
    assert all(set(hyp) == {UNK} for hyp in greedy_search(model, sources()))


def test_an_empty_source_may_give_an_empty_output():
    """The minimum length holds for a non-empty source; a source of EOS alone may end at once."""
    model = Favouring(tiny_model("transformer", V), [EOS])
    src = torch.tensor([[EOS, PAD], [7, EOS]])
    for search in (greedy_search, beam_search):
        assert [len(hyp) for hyp in search(model, src)] == [0, 1]
