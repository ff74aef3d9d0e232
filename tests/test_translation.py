"""Translation of files and the ``python -m nmt`` command line with a trained model."""

import json
import logging
import shutil
import subprocess
import sys
import threading
import time

import pytest
import torch
from conftest import make_toy_corpus, run_training, tiny_model

from nmt.config import DecodeConfig
from nmt.data.normalize import Normalizer
from nmt.data.subword import load_subword
from nmt.decoding.streaming import translate_file, translate_windows
from nmt.decoding.translation import Translator, in_threads, load_decoding, translate_lines
from nmt.device import get_device
from nmt.model_config import ModelMeta
from nmt.model_dir import META_FILE, load_model, write_meta
from nmt.vocab import EOS


def test_translate_file_keeps_order_and_count(trained_model, toy_corpus, tmp_path):
    model_dir, _ = trained_model
    hyp = tmp_path / "out/test.de"
    config = DecodeConfig(beam_size=4, batch_size=7)
    n = translate_file(model_dir, toy_corpus["test.en"], hyp, config, device="cpu")
    hyps = hyp.read_text().splitlines()
    srcs = toy_corpus["test.en"].read_text().splitlines()
    assert n == len(hyps) == len(srcs) == 40
    # Batched by length, yet every output sits on its own input's line: the same as one sentence at a time.
    device = get_device("cpu")
    translator = Translator(*load_model(model_dir, device), config, device)
    alone = [translate_lines(translator, [line])[0] for line in srcs]
    assert hyps == alone
    assert len(set(hyps)) > 30, "distinct inputs get distinct outputs, so a shuffle would show"
    assert not list(hyp.parent.glob(".*.tmp"))


def test_translate_file_logs_progress_when_stderr_is_not_a_terminal(toy_corpus, toy_spm, tmp_path, caplog):
    """Off a terminal (a cluster job's log), progress is a log line every ``progress_every`` seconds."""
    model_dir = tmp_path / "model"
    run_training(toy_corpus, toy_spm, model_dir, max_steps=2, valid_every=2)
    src = tmp_path / "many.en"
    src.write_text("".join(toy_corpus["test.en"].read_text().splitlines(keepends=True) * 10))  # 400 lines
    config = DecodeConfig(method="greedy", batch_size=16, max_len_b=5)
    with caplog.at_level(logging.INFO, logger="nmt.progress"):
        translate_file(model_dir, src, tmp_path / "many.de", config, device="cpu", progress_every=1e-9)
    lines = [r.getMessage() for r in caplog.records if r.name == "nmt.progress"]
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines]
    assert len(lines) >= 10 and done == sorted(done) and done[-1] == 400, lines
    assert lines[-1].startswith(f"translating {src}: 400/400 lines (100%), ") and lines[-1].endswith("(done)")
    assert all(" ETA " in line for line in lines[:-1])


def run_cli(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "nmt", *args], input=stdin, capture_output=True, text=True)


def test_cli_translate_and_score(trained_model, tmp_path):
    model_dir, _ = trained_model
    src = ["the big red dog runs", "a small woman eats", "the cat sleeps"]
    out = run_cli("translate", "--model", str(model_dir), "--beam-size", "3", stdin="".join(s + "\n" for s in src))
    assert out.returncode == 0, out.stderr
    device = get_device("cpu")
    translator = Translator(*load_model(model_dir, device), DecodeConfig(beam_size=3), device)
    assert out.stdout.splitlines() == translate_lines(translator, src)
    (tmp_path / "hyp.de").write_text(out.stdout)
    (tmp_path / "ref.de").write_text(out.stdout)
    scored = run_cli("score", "--hyp", str(tmp_path / "hyp.de"), "--ref", str(tmp_path / "ref.de"), "--trg-lang", "de")
    assert scored.returncode == 0
    assert scored.stdout.splitlines()[0].startswith("bleu\t100.00\tnrefs:1")


def test_cli_errors_are_one_line(tmp_path):
    out = run_cli("translate", "--model", str(tmp_path / "nowhere"), stdin="hello\n")
    assert out.returncode == 1
    expected = "expected a model directory (model.pt, src.model, trg.model, meta.json)"
    message = f"error: {tmp_path / 'nowhere'}: not found; {expected}"
    assert out.stderr.strip().splitlines() == [message]
    assert "Traceback" not in out.stderr


def never_ending_transformer(max_positions: int, vocab: int):
    """A tiny Transformer whose decoder always picks token 4 and never EOS (a decoder stuck in a loop)."""
    model = tiny_model("transformer", vocab, max_positions=max_positions, tie_output=False)
    with torch.no_grad():
        model.decoder.final_norm.weight.zero_()
        model.decoder.final_norm.bias.fill_(1.0)  # every position's output is the all-ones vector
        model.decoder.output.weight.zero_()
        model.decoder.output.weight[4] = 1.0
        model.decoder.output.weight[EOS] = -1.0
    return model


@pytest.mark.parametrize("method", ["greedy", "beam", "sample"])
def test_output_limit_is_clamped_to_max_positions(method, toy_spm, caplog):
    """``1.5 * S + 10`` output tokens would pass max_positions (40): the limit is clamped, the source cut."""
    src_sp = trg_sp = load_subword(toy_spm["en"])
    model = never_ending_transformer(40, src_sp.get_piece_size())
    lines = ["the dog", " ".join(["the big dog"] * 7), " ".join(["the big dog"] * 30), ""]
    lengths = [len(src_sp.encode(line)) + 1 for line in lines]
    assert lengths[0] < 20 < lengths[1] <= 40 < 1.5 * lengths[1] + 10 and lengths[2] > 40
    config = DecodeConfig(method=method, beam_size=2, batch_size=2)
    with caplog.at_level(logging.WARNING):
        hyps = translate_lines(Translator(model, src_sp, trg_sp, config, torch.device("cpu")), lines, name="in.en")
    piece = trg_sp.decode([4])  # <BT>, a piece of its own
    n_tokens = [h.count(piece) for h in hyps]
    # 1.5 * S + 10 - 1 tokens before the forced EOS, at most max_positions - 1
    assert n_tokens == [int(1.5 * lengths[0] + 10) - 1, 39, 39, 0]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"in.en line 3: {lengths[2]} subwords, cut to the model's limit of 40"
    ]


def test_sampling_draws_anew_in_every_window(toy_spm):
    """One generator per file: a window of lines that repeats the previous one gets other samples (the noise
    of back-translation does not repeat every window), and the file samples the same way twice."""
    sp = load_subword(toy_spm["en"])
    model = tiny_model("transformer", sp.get_piece_size())
    lines, _ = make_toy_corpus(8, seed=6)
    config = DecodeConfig(method="sample", batch_size=4)

    def sample() -> list[list[str]]:
        translator = Translator(model, sp, sp, config, torch.device("cpu"))
        return list(translate_windows(translator, lines * 2, window=len(lines)))

    first, second = sample()
    assert first != second
    assert sample() == [first, second]


@pytest.mark.parametrize(
    ("method", "workers", "in_two"),
    [("greedy", None, True), ("beam", None, False), ("beam", 2, True), ("sample", 2, False)],
)
def test_workers_search_batches_at_once_with_the_same_output(trained_model, toy_corpus, method, workers, in_two):
    """On the CPU with 2 threads, greedy search by default and beam search with 2 workers search 2 batches at once,
    each with 1 of torch's threads, and write what one batch at a time writes; by default beam search (K times the
    memory per batch) takes one batch at a time, and sampling, whose draws follow the batches' order, always does."""
    model_dir, _ = trained_model
    lines = toy_corpus["test.en"].read_text().splitlines()
    config = DecodeConfig(method=method, batch_size=5)  # 8 batches
    threads_before = torch.get_num_threads()
    outputs, seen = {}, {}
    try:
        for n in (1, workers):
            translator = load_decoding([model_dir], config, "cpu", threads=2, workers=n)
            calls = seen[n] = set()
            translator.model.encoder.register_forward_pre_hook(
                lambda *_: calls.add((threading.current_thread().name, torch.get_num_threads()))  # noqa: B023
            )
            outputs[n] = translate_lines(translator, lines)
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads_before)
    assert outputs[workers] == outputs[1]
    assert seen[1] == {("MainThread", 2)}
    if in_two:
        assert {name for name, _ in seen[workers]} == {"search_0", "search_1"}
        assert {threads for _, threads in seen[workers]} == {1}
    else:
        assert seen[workers] == {("MainThread", 2)}


def test_in_threads_keeps_order_runs_at_once_and_stops_on_an_error():
    barrier = threading.Barrier(2, timeout=10)  # broken (an error) unless two items run at once
    started = []

    def work(i: int) -> int:
        started.append(i)
        if i < 2:
            barrier.wait()
        time.sleep(0.01 * (i % 3))
        if i == 6:
            raise ValueError("item 6")
        return i * i

    results = []
    with pytest.raises(ValueError, match="item 6"):
        for result in in_threads(work, range(20), workers=2):
            results.append(result)
            assert len(started) <= len(results) + 3  # 2 running, 1 waiting, besides the ones handed back
    assert results == [i * i for i in range(6)]
    assert max(started) <= 9, "items after the failed one and its look-ahead are never run"


def test_translate_file_survives_bad_lines(trained_model, tmp_path, caplog):
    """Bytes that are not UTF-8 and a line of 20,000 words: reported by line, every other line translated."""
    model_dir, _ = trained_model
    src = tmp_path / "in.en"
    src.write_bytes(b"the dog runs\r\n\xff\xfe bad\n" + b"dog " * 20_000 + b"\n\nthe cat")
    config = DecodeConfig(method="greedy")
    with caplog.at_level(logging.WARNING):
        assert translate_file(model_dir, src, tmp_path / "out.de", config, device="cpu") == 5
    hyps = (tmp_path / "out.de").read_text().split("\n")
    assert len(hyps) == 6 and hyps[3] == hyps[5] == ""
    translator = Translator(*load_model(model_dir, torch.device("cpu")), config, torch.device("cpu"))
    alone = translate_lines(translator, ["the dog runs", "the cat"])
    assert [hyps[0], hyps[4]] == alone
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"{src} line 2: not UTF-8 (invalid start byte), bad bytes replaced by U+FFFD",
        f"{src} line 3: 40001 subwords, cut to the model's limit of 1024",
    ]


def test_cli_translate_normalizes_input_like_cleaning(trained_model, tmp_path):
    """The model directory's meta.json makes `nmt translate` repeat the cleaning's source normalization."""
    model_dir, _ = trained_model
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    write_meta(copy, ModelMeta("en", "de", normalize_punctuation=True))
    src, _ = make_toy_corpus(40, seed=5)
    # No-break spaces, soft hyphens inside words, curly quotes: what raw text brings and cleaning removes.
    raw = ["\u00a0 ".join(line.split()).replace("e", "e\u00ad", 1).replace("the", "\u201cthe\u201d", 1) for line in src]
    normalized = [Normalizer("en")(line) for line in raw]
    device = get_device("cpu")
    translator = Translator(*load_model(copy, device), DecodeConfig(beam_size=3), device)
    unnormalized_hyps = translate_lines(translator, raw)
    assert unnormalized_hyps != translate_lines(translator, normalized)  # it matters
    outputs = [
        run_cli("translate", "--model", str(copy), "--beam-size", "3", stdin="".join(s + "\n" for s in lines))
        for lines in (raw, normalized)
    ]
    assert all(out.returncode == 0 for out in outputs), outputs[0].stderr
    assert outputs[0].stdout == outputs[1].stdout
    assert outputs[0].stdout.splitlines() == translate_lines(translator, normalized)


def _normalize_in_a_fresh_process(model_dir, line: str) -> tuple[list[str], list[str]]:
    """:func:`nmt.model_dir.normalize_input` of one line in a new process: the output, and the modules of sacremoses,
    joblib, py3langid and ``nmt.data.filters`` that it loaded."""
    code = (
        "import json, sys; from nmt.model_dir import normalize_input; "
        f"print(json.dumps(list(normalize_input({str(model_dir)!r}, [{line!r}])))); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sacremoses', 'joblib', 'py3langid') "
        "or m == 'nmt.data.filters')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return tuple(map(json.loads, out.stdout.splitlines()))


def test_a_model_without_normalization_does_not_load_the_normalizer(trained_model):
    """sacremoses and langid are slow to import (benchmarks/history.md, "What made it faster", "Start-up")."""
    model_dir, _ = trained_model
    assert _normalize_in_a_fresh_process(model_dir, "a  b") == (["a  b"], [])


def test_normalizing_the_input_loads_only_the_punctuation_normalizer_of_sacremoses(tmp_path):
    """The sacremoses package imports its tokenizer, truecaser and joblib, which translation does not need."""
    meta = {"source_normalization": {"lang": "fr", "unicode": "NFC", "moses_punctuation": True}}
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    assert _normalize_in_a_fresh_process(tmp_path, "Il a dit \u00ab oui \u00bb ?") == (['Il a dit " oui " ?'], [])
