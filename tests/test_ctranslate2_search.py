"""runtime ctranslate2: CTranslate2's greedy search, and its beam search with length_normalization ctranslate2, write
ours, token for token, through translate_file; runtime auto picks CTranslate2 where it runs the search, and says so."""

import logging

import pytest
import torch
from conftest import make_toy_corpus, tiny_model
from test_envs import run_without_torch

import nmt.decoding.ctranslate2 as ct2
from nmt.config import DecodeConfig
from nmt.data.batches import pad
from nmt.data.subword import load_subword
from nmt.decoding.ctranslate2 import ct2_search, load_ctranslate2
from nmt.decoding.search import greedy_search
from nmt.decoding.streaming import translate_file
from nmt.decoding.translation import SourceBatch, load_decoding, translate_nbest
from nmt.errors import ConfigError
from nmt.model_dir import write_model
from nmt.vocab import BOS, EOS, PAD, UNK

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")


def _translate(model_dirs, src, tmp_path, name, **options) -> list[str]:
    hyp = tmp_path / f"{name}.hyp"
    translate_file(model_dirs, src, hyp, DecodeConfig(**options), device="cpu")
    return hyp.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.mark.parametrize(("max_len_a", "max_len_b"), [(1.5, 10), (0.5, 1)])
def test_greedy_equals_ours(trained_model, tmp_path, max_len_a, max_len_b):
    """(0.5, 1) cuts most outputs at limits that differ within a batch (one CTranslate2 limit per batch)."""
    model_dir, _ = trained_model
    lines, _ = make_toy_corpus(300, seed=13)
    lines[5] = lines[77] = ""  # empty lines give empty lines
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = {"method": "greedy", "max_len_a": max_len_a, "max_len_b": max_len_b, "batch_size": 50}
    ours = _translate([model_dir], src, tmp_path, "torch", **options)
    ct2 = _translate([model_dir], src, tmp_path, "ct2", runtime="ctranslate2", **options)
    assert len(ct2) == len(lines) and ct2[5] == ct2[77] == ""
    assert ct2 == ours
    if max_len_b == 1:
        assert len({len(h.split()) for h in ct2}) > 2  # limits differ, and outputs were cut to them


@pytest.mark.parametrize(
    ("beam_size", "alpha", "max_len_a", "max_len_b"), [(4, 1.0, 1.5, 10), (5, 0.6, 0.5, 1), (3, 0.0, 1.5, 10)]
)
def test_beam_search_equals_ours_with_the_shared_normalization(
    trained_model, tmp_path, beam_size, alpha, max_len_a, max_len_b
):
    """CTranslate2's beam search is ours with length_normalization ctranslate2 (|Y| ** alpha, its stop, its last
    step, renormalised log-probabilities), 1-best and n-best lists; (0.5, 1) ends most searches at their limits,
    which differ within a batch (CTranslate2 takes one per call)."""
    model_dir, _ = trained_model
    lines, _ = make_toy_corpus(150, seed=17)
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = {"method": "beam", "beam_size": beam_size, "length_penalty": alpha, "max_len_a": max_len_a}
    options |= {"max_len_b": max_len_b, "length_normalization": "ctranslate2", "batch_size": 50}
    ours = _translate([model_dir], src, tmp_path, "torch", **options)
    assert _translate([model_dir], src, tmp_path, "ct2", runtime="ctranslate2", **options) == ours
    if max_len_b == 1:
        assert len({len(h.split()) for h in ours}) > 2  # limits differ, and outputs reached them
    nbest = {
        runtime: translate_nbest(
            load_decoding([model_dir], DecodeConfig(runtime=runtime, **options), "cpu"), lines[:60], 3
        )
        for runtime in ("torch", "ctranslate2")
    }
    for theirs, mine in zip(nbest["ctranslate2"], nbest["torch"], strict=True):
        assert [hyp for hyp, _, _ in theirs] == [hyp for hyp, _, _ in mine] and len(mine) == 3
        assert [score for _, score, _ in theirs] == pytest.approx([score for _, score, _ in mine], abs=1e-4)
        assert [lp for _, _, lp in theirs] == pytest.approx([lp for _, _, lp in mine], abs=1e-3)


def test_an_export_translates_as_its_model_directory_without_exporting_again(trained_model, tmp_path, monkeypatch):
    """An export (nmt export) is loaded as it is, and its inputs are cut to the model's max_positions (spec.json)
    as torch cuts them: the greedy output of the model directory, a line far past the limit included."""
    import nmt.decoding.ctranslate2 as ct2

    model_dir, _ = trained_model
    export = ct2.export_model(model_dir, tmp_path / "ct2")
    assert {"model.bin", "spec.json", "src.model", "trg.model"} <= {p.name for p in export.iterdir()}
    lines, _ = make_toy_corpus(60, seed=15)
    lines[7] = " ".join(["dog"] * 1500)  # 3001 subwords: cut to 1024
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ours = _translate([model_dir], src, tmp_path, "torch", method="greedy")

    def export_again(*args, **kwargs):
        raise AssertionError("an export is translated as it is")

    monkeypatch.setattr(ct2, "export_model", export_again)
    assert _translate([export], src, tmp_path, "ct2", method="greedy", runtime="ctranslate2") == ours


def test_an_export_translates_without_torch(trained_model, tmp_path):
    """A CTranslate2 decoding process, the workflow's (translate_file) and the command line's, never imports torch:
    a torch package whose import fails is first on the path."""
    import nmt.decoding.ctranslate2 as ct2

    model_dir, _ = trained_model
    export = ct2.export_model(model_dir, tmp_path / "ct2", quantization="int8")
    lines, _ = make_toy_corpus(40, seed=16)
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = (
        "from nmt.config import DecodeConfig\n"
        "from nmt.decoding.streaming import translate_file\n"
        f"translate_file({str(export)!r}, {str(src)!r}, {str(tmp_path / 'job.hyp')!r}, "
        "DecodeConfig(method='greedy', runtime='ctranslate2'), threads=1)\n"
    )
    job = run_without_torch(tmp_path, ["-c", code], tmp_path)
    assert job.returncode == 0, job.stderr[-2000:]
    cli = ["-m", "nmt", "translate", "--model", str(export), "--runtime", "ctranslate2", "--input", str(src)]
    out = run_without_torch(tmp_path, cli, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    hyps = (tmp_path / "job.hyp").read_text(encoding="utf-8").splitlines()
    assert out.stdout.splitlines() == hyps and len(hyps) == 40 and all(hyps)


@pytest.mark.parametrize("topk", [0, 5])
def test_sampling_is_seeded(trained_model, tmp_path, topk):
    model_dir, _ = trained_model
    lines, _ = make_toy_corpus(100, seed=14)
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = {"method": "sample", "sampling_topk": topk, "runtime": "ctranslate2"}
    first = _translate([model_dir], src, tmp_path, "a", seed=3, **options)
    assert first == _translate([model_dir], src, tmp_path, "b", seed=3, **options)
    assert first != _translate([model_dir], src, tmp_path, "c", seed=4, **options)
    assert len(first) == 100 and all(first)


def test_gnmt_beam_and_ensembles_are_refused(trained_model, tmp_path):
    model_dir, _ = trained_model
    with pytest.raises(ConfigError, match=r"^decoding\.runtime: ctranslate2 runs beam search with length_normaliz"):
        DecodeConfig(runtime="ctranslate2").check("decoding")
    src = tmp_path / "src.txt"
    src.write_text("a b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^decoding\.runtime: ctranslate2 cannot decode an ensemble \(of 2 models\)"):
        config = DecodeConfig(method="greedy", runtime="ctranslate2")
        translate_file([model_dir, model_dir], src, tmp_path / "hyp", config)
    export = ct2.export_model(model_dir, tmp_path / "ct2")
    with pytest.raises(
        ConfigError, match=r"ct2: a CTranslate2 export decodes in CTranslate2, which cannot decode beam"
    ):
        translate_file([export], src, tmp_path / "hyp", DecodeConfig(runtime="auto"))


@pytest.mark.parametrize(
    ("options", "models", "runtime", "why"),
    [
        ({"method": "greedy"}, 1, "ctranslate2", "one Transformer and greedy, which CTranslate2 runs as torch does"),
        ({"length_normalization": "ctranslate2"}, 1, "ctranslate2", "one Transformer and beam5"),
        ({}, 1, "torch", "CTranslate2 cannot decode beam search with length_normalization gnmt"),
        (
            {"method": "greedy", "quantization": "int8"},
            2,
            "torch",
            "CTranslate2 cannot decode an ensemble (of 2 models); quantization int8 unused",
        ),
    ],
)
def test_auto_picks_ctranslate2_where_it_runs_the_search_and_says_why(
    trained_model, tmp_path, caplog, options, models, runtime, why
):
    model_dir, _ = trained_model
    lines, _ = make_toy_corpus(40, seed=18)
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="nmt.decoding.translation"):
        auto = _translate([model_dir] * models, src, tmp_path, "auto", runtime="auto", **options)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("runtime auto:")]
    assert len(said) == 1 and said[0].startswith(f"runtime auto: {runtime} ({why}"), said
    torch_options = {**options, "quantization": "float32"}
    assert auto == _translate([model_dir] * models, src, tmp_path, "torch", runtime="torch", **torch_options)


def favouring_model(spm_path, ranking: list[int]):
    """An untrained Transformer whose decoder prefers the tokens of ``ranking`` (the first most) to all others,
    whatever the input: the final norm gives every position the same vector."""
    sp = load_subword(spm_path)
    model = tiny_model("transformer", sp.get_piece_size(), tie_output=False)
    with torch.no_grad():
        model.decoder.final_norm.weight.zero_()
        model.decoder.final_norm.bias.zero_()
        model.decoder.final_norm.bias[0] = 1.0
        model.decoder.output.weight[:, 0] = 0.0
        for rank, token in enumerate(ranking):
            model.decoder.output.weight[token, 0] = 10.0 * (len(ranking) - rank)
    return model, sp


@pytest.mark.parametrize("method", ["greedy", "sample"])
def test_no_empty_output_and_never_pad_or_bos(toy_spm, tmp_path, method):
    """As our search: a model that prefers EOS, PAD, BOS, then UNK writes UNK then EOS by greedy search (equal
    to ours), and sampling draws none of them first (UNK is not sampled either)."""
    model, sp = favouring_model(toy_spm["en"], [EOS, PAD, BOS, UNK])
    write_model(tmp_path, {"spec": model.spec, "model": model.state_dict()}, toy_spm["en"], toy_spm["en"])
    lines, _ = make_toy_corpus(6, seed=15)
    src = [ids + [EOS] for ids in sp.encode(lines)]
    ct2_model, _, _ = load_ctranslate2(tmp_path, "cpu", 1)
    search = ct2_search(ct2_model.translator, sp, sp, DecodeConfig(method=method))
    (hyps,) = search([SourceBatch(src, 1.5, 10)])
    if method == "greedy":
        assert hyps == greedy_search(model, pad(src)) == [[UNK]] * len(lines)
    else:
        assert all(hyp and not {PAD, BOS, UNK} & set(hyp) for hyp in hyps), hyps
