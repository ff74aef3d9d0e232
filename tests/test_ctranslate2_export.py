"""Export to CTranslate2: its greedy search writes our greedy search's tokens; other architectures are refused."""

import json
import subprocess
import sys
from itertools import groupby

import pytest
import torch
from conftest import ARCHS, assert_one_line, make_toy_corpus, tiny_model

from nmt.checkpoint import save_checkpoint
from nmt.config import DecodeConfig
from nmt.data.batches import pad
from nmt.decoding.ctranslate2 import ct2_compute_type, export_model, load_ctranslate2, max_decoding_length
from nmt.decoding.search import greedy_search, max_output_lengths
from nmt.decoding.translation import Translator, translate_lines
from nmt.device import get_device
from nmt.errors import ConfigError
from nmt.model_dir import load_model
from nmt.vocab import BOS, EOS


def ct2_greedy(translator, src_sp, lines: list[str], max_len_a: float, max_len_b: int) -> list[list[str]]:
    """CTranslate2's greedy pieces for ``lines``, in batches of one source length (one length limit each)."""
    pieces = src_sp.encode(lines, out_type=str)
    order = sorted(range(len(lines)), key=lambda i: len(pieces[i]))
    hyps: list[list[str]] = [[] for _ in lines]
    for n, group in groupby(order, key=lambda i: len(pieces[i])):
        group = list(group)
        results = translator.translate_batch(
            [pieces[i] for i in group], beam_size=1, max_decoding_length=max_decoding_length(n, max_len_a, max_len_b)
        )
        for i, result in zip(group, results, strict=True):
            hyps[i] = result.hypotheses[0]
    return hyps


@pytest.mark.parametrize(("max_len_a", "max_len_b"), [(1.5, 10), (0.0, 4)])
def test_ctranslate2_greedy_equals_ours(trained_model, tmp_path, max_len_a, max_len_b):
    ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    out = export_model(model_dir, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="float32")
    model, src_sp, trg_sp = load_model(model_dir, get_device("cpu"))
    lines, _ = make_toy_corpus(300, seed=11)
    ct2 = ct2_greedy(translator, src_sp, lines, max_len_a, max_len_b)
    ids = [p + [EOS] for p in src_sp.encode(lines)]
    ours = []
    for start in range(0, len(ids), 50):
        ours += greedy_search(model, pad(ids[start : start + 50]), max_len_a, max_len_b)
    assert [[trg_sp.id_to_piece(i) for i in hyp] for hyp in ours] == ct2
    # The same search through translation.py, detokenized.
    config = DecodeConfig(method="greedy", max_len_a=max_len_a, max_len_b=max_len_b)
    torch_translator = Translator(model, src_sp, trg_sp, config, get_device("cpu"))
    assert translate_lines(torch_translator, lines) == [trg_sp.decode(h) for h in ct2]
    limits = [max_decoding_length(len(p) - 1, max_len_a, max_len_b) for p in ids]
    at_limit = sum(len(h) == limit for h, limit in zip(ours, limits, strict=True))
    if max_len_b == 4:  # 3 output tokens at most: most sentences are cut, so both must cut at the same length
        assert at_limit > 200
        assert all(len(h) <= 3 for h in ct2)


def test_ctranslate2_scores_equal_ours(trained_model, tmp_path):
    """Per-token log-probabilities of reference translations agree to float32 rounding (1e-5).

    Tighter than the token test: a wrong layer-norm epsilon (1e-6) is off by 4e-5 here, yet flips no token.
    """
    ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    translator = ctranslate2.Translator(str(export_model(model_dir, tmp_path / "ct2")), device="cpu")
    model, src_sp, trg_sp = load_model(model_dir, get_device("cpu"))
    src, trg = make_toy_corpus(50, seed=12)
    src_ids, trg_ids = [p + [EOS] for p in src_sp.encode(src)], trg_sp.encode(trg)
    with torch.no_grad():
        lprobs = torch.log_softmax(model(pad(src_ids), pad(trg_ids, prefix=BOS)).float(), dim=-1)  # (B, T, V)
    ours = [lprobs[i, torch.arange(len(t) + 1), t + [EOS]].tolist() for i, t in enumerate(trg_ids)]
    results = translator.score_batch(src_sp.encode(src, out_type=str), trg_sp.encode(trg, out_type=str))
    theirs = [result.log_probs for result in results]
    assert [len(t) for t in theirs] == [len(o) for o in ours]
    assert max(abs(a - b) for t, o in zip(theirs, ours, strict=True) for a, b in zip(t, o, strict=True)) < 1e-5


@pytest.mark.parametrize("arch", [a for a in ARCHS if a != "transformer"])
def test_export_refuses_other_architectures(arch, tmp_path):
    model = tiny_model(arch)
    save_checkpoint(tmp_path / "model" / "model.pt", {"spec": model.spec, "model": model.state_dict()})
    with pytest.raises(ConfigError) as excinfo:
        export_model(tmp_path / "model", tmp_path / "ct2")
    assert_one_line(excinfo, arch, "CTranslate2", "model.pt")
    argv = [sys.executable, "-m", "nmt", "export", str(tmp_path / "model"), str(tmp_path / "o")]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'model' / 'model.pt'}: a {arch} model")


def test_export_without_ctranslate2_says_so(trained_model, tmp_path):
    model_dir, _ = trained_model
    # None in sys.modules makes `import ctranslate2` fail as if the package were not installed.
    code = (
        "import sys; sys.modules['ctranslate2'] = None; from nmt.__main__ import main; "
        f"main(['export', {str(model_dir)!r}, {str(tmp_path / 'ct2')!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert (
        out.stderr.strip().splitlines()[-1]
        == "error: export needs the ctranslate2 package: pip install 'ctranslate2==4.8.5'"
    )
    assert not (tmp_path / "ct2").exists()


def test_export_does_not_overwrite_without_force(trained_model, tmp_path):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    (tmp_path / "ct2").mkdir()
    with pytest.raises(Exception) as excinfo:
        export_model(model_dir, tmp_path / "ct2")
    assert_one_line(excinfo, tmp_path / "ct2", "--force")
    assert (export_model(model_dir, tmp_path / "ct2", force=True) / "model.bin").is_file()
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("quantization", [None, "int8"])
def test_an_export_records_its_weights_and_computes_in_them_on_the_cpu(trained_model, tmp_path, quantization):
    """spec.json records the weight type, from which a GPU's compute type follows (ct2_compute_type); on the CPU
    the export computes in its own type."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    export = export_model(model_dir, tmp_path / "ct2", quantization)
    assert json.loads((export / "spec.json").read_text())["quantization"] == (quantization or "float32")
    model, _, _ = load_ctranslate2(export, "cpu", 1)
    assert model.translator.compute_type == ("int8_float32" if quantization else "float32")


def test_max_decoding_length_is_our_limit_without_eos():
    src = torch.tensor([[5, 6, 7, EOS, 0], [5, 6, 7, 8, EOS]])
    assert max_output_lengths(src, 1.5, 10).tolist() == [max_decoding_length(n, 1.5, 10) + 1 for n in (3, 4)]


@pytest.mark.parametrize(
    ("device", "weights", "bf16", "compute_type"),
    [
        ("cpu", "float32", "auto", "default"),  # the export's own type
        ("cpu", "int8", "on", "default"),
        ("cuda", "float32", "auto", "float16"),
        ("cuda", "int8", "auto", "int8_float16"),
        ("cuda", "int8_float32", "on", "int8_bfloat16"),
        ("cuda", "float32", "on", "bfloat16"),
        ("cuda", "float32", "off", "float32"),
        ("cuda", "int8", "off", "int8_float32"),
        ("cuda", None, "auto", "default"),  # an export that does not record its weights
    ],
)
def test_ctranslate2_computes_in_half_precision_on_a_gpu(device, weights, bf16, compute_type):
    assert ct2_compute_type(device, weights, bf16) == compute_type
