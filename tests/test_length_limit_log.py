"""Translation logs how many outputs stopped at their length limit: one line per set of lines."""

import logging

import pytest
import torch

from nmt.config import DecodeConfig
from nmt.data.subword import load_subword
from nmt.decoding.streaming import translate_windows
from nmt.decoding.translation import Translator, translate_lines
from nmt.vocab import BOS, EOS, PAD

A = 5  # the token every output is made of


class LoopingOnLongSources:
    """A decoder that writes A, then ends for a source of at most :data:`SHORT` ids (EOS included) and repeats A
    forever for a longer one: the long sources' outputs run into their length limit."""

    training = False
    spec = {"config": {}}  # no position limit

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def init_state(self, src):
        return {"loops": (src != PAD).sum(dim=1) > SHORT}  # (B,)

    def step(self, trg_prev, state):
        logits = torch.zeros(trg_prev.size(0), self.vocab)
        logits[:, A] = 5.0
        logits[~state["loops"] & (trg_prev != BOS), EOS] = 10.0
        return logits, state

    def train(self, mode=True):
        return self

    def eval(self):
        return self


SHORT = 4
LINES = ["the dog", "", "the big dog runs to the old house", "a cat", "the small cat sees a big dog in the house"]
MESSAGE = "{name}: {n} of {total} outputs stopped at the length limit max_len_a * S + max_len_b = 0 * S + 3 subwords"
ADVICE = "; if they are cut short, raise decoding.max_len_b (--max-len-b)"


def limit_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "outputs stopped at the length limit" in r.getMessage()]


@pytest.fixture
def toy(toy_spm):
    sp = load_subword(toy_spm["en"])
    long = sum(len(ids) + 1 > SHORT for ids in sp.encode(LINES) if ids)
    assert 0 < long < len(LINES) - 1  # some outputs stop at the limit, some end before it, one line is empty
    return LoopingOnLongSources(sp.get_piece_size()), sp, long


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_outputs_at_the_length_limit_are_counted_in_one_log_line(toy, caplog, method):
    model, sp, long = toy
    config = DecodeConfig(method=method, beam_size=2, max_len_a=0.0, max_len_b=3)
    with caplog.at_level(logging.INFO, logger="nmt.decoding.translation"):
        hyps = translate_lines(Translator(model, sp, sp, config, torch.device("cpu")), LINES, name="test.en")
    assert sum(hyp == sp.decode([A, A]) for hyp in hyps) == long  # cut at the limit: 2 tokens and EOS
    assert limit_lines(caplog) == [MESSAGE.format(name="test.en", n=long, total=len(LINES)) + ADVICE]


def test_no_output_at_the_limit_says_so_without_advice(toy, caplog):
    model, sp, _ = toy
    short = [line for line in LINES if len(sp.encode(line)) + 1 <= SHORT]
    config = DecodeConfig(method="greedy", max_len_a=0.0, max_len_b=3)
    with caplog.at_level(logging.INFO, logger="nmt.decoding.translation"):
        translate_lines(Translator(model, sp, sp, config, torch.device("cpu")), short)
    assert limit_lines(caplog) == [MESSAGE.format(name="input", n=0, total=len(short))]


@pytest.mark.parametrize("nbest", [None, 2])
def test_a_file_translated_window_by_window_logs_one_count(toy, caplog, nbest):
    """Over every window of the input (n-best lists: their best), once the input is done."""
    model, sp, long = toy
    config = DecodeConfig(method="greedy" if nbest is None else "beam", beam_size=2, max_len_a=0.0, max_len_b=3)
    translator = Translator(model, sp, sp, config, torch.device("cpu"))
    with caplog.at_level(logging.INFO, logger="nmt.decoding.translation"):
        out = list(translate_windows(translator, LINES, "in.txt", 2, nbest=nbest))
    assert len(out) == 3
    assert limit_lines(caplog) == [MESSAGE.format(name="in.txt", n=long, total=len(LINES)) + ADVICE]
