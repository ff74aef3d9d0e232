"""Translation of files and the ``python -m nmt`` command line with a trained model."""

import shutil
import subprocess
import sys

from conftest import make_toy_corpus

from nmt.config import DecodeConfig, ModelMeta
from nmt.filters import Normalizer
from nmt.translation import get_device, load_model, translate_file, translate_lines, write_meta


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
    model, src_sp, trg_sp = load_model(model_dir, device)
    alone = [translate_lines(model, src_sp, trg_sp, [line], config, device)[0] for line in srcs]
    assert hyps == alone
    assert len(set(hyps)) > 30, "distinct inputs get distinct outputs, so a shuffle would show"
    assert not list(hyp.parent.glob(".*.tmp"))


def run_cli(*args, stdin=""):
    return subprocess.run([sys.executable, "-m", "nmt", *args], input=stdin, capture_output=True, text=True)


def test_cli_translate_and_score(trained_model, tmp_path):
    model_dir, _ = trained_model
    src = ["the big red dog runs", "a small woman eats", "the cat sleeps"]
    out = run_cli("translate", "--model", str(model_dir), "--beam-size", "3", stdin="".join(s + "\n" for s in src))
    assert out.returncode == 0, out.stderr
    device = get_device("cpu")
    model, src_sp, trg_sp = load_model(model_dir, device)
    assert out.stdout.splitlines() == translate_lines(model, src_sp, trg_sp, src, DecodeConfig(beam_size=3), device)
    (tmp_path / "hyp.de").write_text(out.stdout)
    (tmp_path / "ref.de").write_text(out.stdout)
    scored = run_cli("score", "--hyp", str(tmp_path / "hyp.de"), "--ref", str(tmp_path / "ref.de"), "--trg-lang", "de")
    assert scored.returncode == 0
    assert scored.stdout.splitlines()[0].startswith("bleu\t100.00\tnrefs:1")


def test_cli_errors_are_one_line(tmp_path):
    out = run_cli("translate", "--model", str(tmp_path / "nowhere"), stdin="hello\n")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'nowhere' / 'model.pt'}: checkpoint not found"
    assert "Traceback" not in out.stderr


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
    model, src_sp, trg_sp = load_model(copy, device)
    config = DecodeConfig(beam_size=3)
    unnormalized_hyps = translate_lines(model, src_sp, trg_sp, raw, config, device)
    assert unnormalized_hyps != translate_lines(model, src_sp, trg_sp, normalized, config, device)  # it matters
    outputs = [
        run_cli("translate", "--model", str(copy), "--beam-size", "3", stdin="".join(s + "\n" for s in lines))
        for lines in (raw, normalized)
    ]
    assert all(out.returncode == 0 for out in outputs), outputs[0].stderr
    assert outputs[0].stdout == outputs[1].stdout
    assert outputs[0].stdout.splitlines() == translate_lines(model, src_sp, trg_sp, normalized, config, device)
