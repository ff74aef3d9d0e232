"""Bad input to ``python -m nmt``: one row per case, each with its exit status and one clear line on stderr.

Most rows run :func:`nmt.__main__.main` in this process (stdin, stdout and stderr are the test's);
the rows that need a real process (a closed stdin, a closed output pipe) run ``python -m nmt``.
"""

import dataclasses
import gzip
import io
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from conftest import TOY_MODEL, toy_files

from nmt.__main__ import build_parser, main, train_files
from nmt.config import DecodeConfig
from nmt.decoding.translation import Translator, translate_lines
from nmt.device import get_device
from nmt.model_dir import load_model
from nmt.training.files import TrainFiles

LONG = " ".join(["dog"] * 20_000)  # about 40,000 subwords, far past max_positions (1024)


def model_copy(tmp: Path, model_dir: Path, change) -> Path:
    """A copy of the trained model directory with ``change(copy)`` applied."""
    copy = tmp / "model"
    shutil.copytree(model_dir, copy, ignore=shutil.ignore_patterns("checkpoints"))
    change(copy)
    return copy


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:1000])


def replace_by_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def other_architecture(path: Path) -> None:
    """Weights that do not fit the spec saved with them (a third encoder layer they lack)."""
    ckpt = torch.load(path, weights_only=True)
    ckpt["spec"]["config"]["enc_layers"] += 1
    torch.save(ckpt, path)


def other_vocabulary(model_dir: Path) -> None:
    """Swap in a subword model of another size (one trained on different text)."""
    import sentencepiece as spm

    text = model_dir / "other.txt"
    text.write_text("".join(f"w{i} x{i % 7} y{i % 13}\n" for i in range(300)))
    ids = dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(model_dir / "other"), vocab_size=25, **ids, minloglevel=2
    )
    os.replace(model_dir / "other.model", model_dir / "src.model")


def same_size_vocabulary(model_dir: Path) -> None:
    """Swap in a subword model of the same size but other pieces (its pieces' order reversed past the specials)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto.FromString((model_dir / "src.model").read_bytes())
    pieces = [(p.piece, p.score, p.type) for p in proto.pieces]
    for piece, (text, score, kind) in zip(proto.pieces[4:], pieces[:3:-1], strict=True):
        piece.piece, piece.score, piece.type = text, score, kind
    (model_dir / "src.model").write_bytes(proto.SerializeToString())


def many_to_many(model_dir: Path) -> None:
    """The meta.json of a model from and into German and English (its subword model lacks their tags, which is
    checked after the target language is asked)."""
    meta = json.loads((model_dir / "meta.json").read_text())
    meta["source_normalization"] = {**(meta["source_normalization"] or {}), "lang": None, "langs": ["de", "en"]}
    meta["source_normalization"].setdefault("moses_punctuation", True)
    meta["multilingual"] = {"directions": ["de-en", "en-de"], "tags": {"de": "<2de>", "en": "<2en>"}}
    (model_dir / "meta.json").write_text(json.dumps(meta))


# What a case needs on disk: {name: bytes} files in tmp, or a model directory variant.
MODELS = {
    "trained": lambda tmp, m: m,
    "missing": lambda tmp, m: tmp / "nowhere",
    "a file": lambda tmp, m: m / "model.pt",
    "no src.model": lambda tmp, m: model_copy(tmp, m, lambda c: (c / "src.model").unlink()),
    "corrupt src.model": lambda tmp, m: model_copy(tmp, m, lambda c: (c / "src.model").write_bytes(b"garbage")),
    "other vocabulary": lambda tmp, m: model_copy(tmp, m, other_vocabulary),
    "same-size vocabulary": lambda tmp, m: model_copy(tmp, m, same_size_vocabulary),
    "truncated model.pt": lambda tmp, m: model_copy(tmp, m, lambda c: truncate(c / "model.pt")),
    "tensor model.pt": lambda tmp, m: model_copy(tmp, m, lambda c: torch.save(torch.zeros(3), c / "model.pt")),
    "model.pt of another spec": lambda tmp, m: model_copy(tmp, m, lambda c: other_architecture(c / "model.pt")),
    "model.pt a directory": lambda tmp, m: model_copy(tmp, m, lambda c: replace_by_directory(c / "model.pt")),
    "one folder too high": lambda tmp, m: results_tree(tmp, m) / "en-de/transformer",
    "many-to-many": lambda tmp, m: model_copy(tmp, m, many_to_many),
}


def results_tree(tmp: Path, model_dir: Path) -> Path:
    """``tmp/results`` as the workflow writes it: two seeds of the Transformer and the reverse model."""
    for folder in (
        "en-de/transformer/baseline/seed1/model",
        "en-de/transformer/baseline/seed2/model",
        "en-de/backtranslation/reverse",
    ):
        shutil.copytree(model_dir, tmp / "results" / folder, ignore=shutil.ignore_patterns("checkpoints"))
    return tmp / "results"


T = ["translate", "--model", "{model}", "--beam-size", "2"]
S = ["score", "--hyp", "{tmp}/hyp", "--ref", "{tmp}/ref"]

# (id, argv, model variant, stdin, files, exit status, stderr line (regex; None: nothing logged at WARNING
# or above), stdout: for translate the source lines whose translation each output line must equal, None
# where any output will do; for score a regex). fmt: skip keeps a case to two or three lines, as a table reads.
CASES = [
    ("translate: a line not UTF-8", T, "trained", b"the dog runs\n\xff\xfe bad\nthe cat\n", {}, 0,
     r"WARNING .*stdin line 2: not UTF-8 \(invalid start byte\), bad bytes replaced by U\+FFFD",
     ["the dog runs", None, "the cat"]),
    ("translate: a line of 20,000 words", T, "trained", f"the dog runs\n{LONG}\nthe cat\n".encode(), {}, 0,
     r"WARNING .*stdin line 2: 40001 subwords, cut to the model's limit of 1024", ["the dog runs", None, "the cat"]),
    ("translate: empty and blank lines", T, "trained", b"\nthe dog runs\n   \n\t\nthe cat\n\n", {}, 0, None,
     ["", "the dog runs", "", "", "the cat", ""]),
    ("translate: CRLF line ends", T, "trained", b"the dog runs\r\nthe cat\r\n", {}, 0, None,
     ["the dog runs", "the cat"]),
    ("translate: CR-only line ends (classic Mac OS)", T, "trained", b"the dog runs\rthe cat\r", {}, 0, None,
     ["the dog runs", "the cat"]),
    ("translate: a CR inside a line of LF input", T, "trained", b"the dog\rruns\nthe cat\n", {}, 0, None,
     [None, "the cat"]),
    ("translate: --output is the --input", [*T, "--input", "{tmp}/src", "--output", "{tmp}/src"], "trained", b"",
     {"src": b"the cat\n"}, 1, r"error: {tmp}/src: is also an input \({tmp}/src\); write the output elsewhere", None),
    ("translate: --output below a file", [*T, "--output", "{tmp}/src/out"], "trained", b"the cat\n",
     {"src": b"the cat\n"}, 1, r"error: {tmp}/src.*: Not a directory", None),
    ("translate: --output a folder by a final slash", [*T, "--output", "{tmp}/new/"], "trained", b"the cat\n", {}, 1,
     r"error: {tmp}/new/: names a folder; give the path of the file to write", None),
    ("translate: --output an existing folder", [*T, "--output", "{tmp}"], "trained", b"the cat\n", {}, 1,
     r"error: {tmp}: names a folder; give the path of the file to write", None),
    ("subword: --src-spm a folder", ["subword", "--src", "{tmp}/src", "--trg", "{tmp}/src", "--src-spm", "{tmp}/m/",
     "--trg-spm", "{tmp}/t.model"], "trained", b"", {"src": b"the cat\n"}, 1,
     r"error: {tmp}/m/: names a folder; give the path of the file to write", None),
    ("subword: a gzip input", ["subword", "--src", "{tmp}/src.gz", "--trg", "{tmp}/src", "--src-spm", "{tmp}/m",
     "--trg-spm", "{tmp}/t.model"], "trained", b"", {"src.gz": gzip.compress(b"the cat\n"), "src": b"the cat\n"}, 1,
     r"error: {tmp}/src.gz: compressed \(gzip or xz\); decompress it first, this reads plain UTF-8 text", None),
    ("subword: a Latin-1 line", ["subword", "--src", "{tmp}/src", "--trg", "{tmp}/trg", "--src-spm", "{tmp}/m",
     "--trg-spm", "{tmp}/t.model"], "trained", b"", {"src": b"the cat\n", "trg": b"die Katze\nf\xfcr\n"}, 1,
     r"error: {tmp}/trg: line 2 is not UTF-8 \(invalid start byte\)", None),
    ("translate: a many-to-many model without --trg-lang", T, "many-to-many", b"the cat\n", {}, 1,
     r"error: {model}/meta.json: a multilingual model \(target languages and tags: de <2de>, en <2en>\): give the "
     r"target language \(--trg-lang\)$", None),
    ("translate: a language into itself", [*T, "--src-lang", "de", "--trg-lang", "de"], "many-to-many", b"the cat\n",
     {}, 1, r"error: translate: --src-lang and --trg-lang are both 'de'; a model translates between two$", None),
    ("translate: no newline at the end", T, "trained", b"the dog runs\nthe cat", {}, 0, None,
     ["the dog runs", "the cat"]),
    ("translate: empty input", T, "trained", b"", {}, 0, None, []),
    ("translate: missing model directory", T, "missing", b"the cat\n", {}, 1,
     r"error: {tmp}/nowhere: not found; expected a model directory \(model.pt, src.model, trg.model, "
     r"meta.json\)", None),
    ("translate: a file as model directory", T, "a file", b"the cat\n", {}, 1,
     r"error: {model}: is a file; expected a model directory", None),
    ("translate: model directory without src.model", T, "no src.model", b"the cat\n", {}, 1,
     r"error: {model}/src.model: subword model not found", None),
    ("translate: corrupt src.model", T, "corrupt src.model", b"the cat\n", {}, 1,
     r"error: {model}/src.model: not a sentencepiece model", None),
    ("translate: src.model of another model", T, "other vocabulary", b"the cat\n", {}, 1,
     r"error: {model}/src.model: \d+ pieces, but {model}/model.pt was trained with \d+: the subword model belongs "
     r"to another model", None),
    ("translate: src.model of another model, of the same size", T, "same-size vocabulary", b"the cat\n", {}, 1,
     r"error: {model}/src.model: not the subword model {model}/meta.json records \(its sha256 differs\)", None),
    ("translate: truncated model.pt", T, "truncated model.pt", b"the cat\n", {}, 1,
     r"error: {model}/model.pt: not a readable checkpoint", None),
    ("translate: model.pt that is no checkpoint", T, "tensor model.pt", b"the cat\n", {}, 1,
     r"error: {model}/model.pt: not a checkpoint of this toolkit \(it holds a Tensor\)", None),
    ("translate: weights that do not fit their spec", T, "model.pt of another spec", b"the cat\n", {}, 1,
     r"error: {model}/model.pt: weights do not fit the model spec they came with \(RuntimeError: Error\(s\) in "
     r"loading state_dict for Seq2Seq: Missing key\(s\) in state_dict: .*\.\.\.\)", None),
    ("translate: model.pt a directory", T, "model.pt a directory", b"the cat\n", {}, 1,
     r"error: {model}/model.pt: is a directory, not a checkpoint", None),
    ("translate: --model a folder above model directories", T, "one folder too high", b"the cat\n", {}, 1,
     r"error: {model}: has no model.pt; expected a model directory \(model.pt, src.model, trg.model, meta.json\); "
     r"model directories inside it: baseline/seed1/model, baseline/seed2/model$", None),
    ("translate: --beam-size 0", [*T, "--beam-size", "0"], "trained", b"the cat\n", {}, 2,
     r"python -m nmt translate: error: argument --beam-size: must be >= 1, got 0 \(see --help\)", None),
    ("translate: --batch-size abc", [*T, "--batch-size", "abc"], "trained", b"the cat\n", {}, 2,
     r"python -m nmt translate: error: argument --batch-size: expected an integer, got 'abc'", None),
    ("translate: negative --length-penalty", [*T, "--length-penalty", "-1"], "trained", b"the cat\n", {}, 1,
     r"error: translate.length_penalty: must be >= 0, got -1.0", None),
    ("translate: no --model", ["translate"], "trained", b"", {}, 2,
     r"python -m nmt translate: error: the following arguments are required: --model", None),
    ("score: both files empty", S, "trained", b"", {"hyp": b"", "ref": b""}, 1,
     r"error: {tmp}/hyp and {tmp}/ref: no sentences to score \(both files are empty\)", None),
    ("score: line counts differ", S, "trained", b"", {"hyp": b"a\nb\n", "ref": b"a\n"}, 1,
     r"error: {tmp}/hyp has 2 lines but {tmp}/ref has 1", None),
    ("score: hypothesis not UTF-8", S, "trained", b"", {"hyp": b"a b\nc \xe4 d\n", "ref": b"a b\nc d\n"}, 1,
     r"error: {tmp}/hyp: line 2 is not UTF-8 \(invalid continuation byte\)", None),
    ("score: reference missing", S, "trained", b"", {"hyp": b"a\n"}, 1, r"error: {tmp}/ref: file not found", None),
    ("score: a directory as hypothesis", ["score", "--hyp", "{tmp}", "--ref", "{tmp}/ref"], "trained", b"",
     {"ref": b"a\n"}, 1, r"error: {tmp}: is a directory, not a file", None),
    ("score: --trg-lang not a language code", [*S, "--trg-lang", "german"], "trained", b"",
     {"hyp": b"a\n", "ref": b"a\n"}, 1,
     r"error: target language 'german' is not a language code such as 'de', 'zh' or 'ja' \(ISO 639\)", None),
    ("score: CRLF hypotheses", S, "trained", b"", {"hyp": b"a b c d\r\n", "ref": b"a b c d\n"}, 0, None,
     r"^bleu\t100.00\t"),
    ("score: a reference with a BOM", S, "trained", b"", {"hyp": b"a b c d\n", "ref": b"\xef\xbb\xbfa b c d\n"}, 0,
     None, r"^bleu\t100.00\t"),
    ("score: --ref twice", [*S, "--ref", "{tmp}/hyp"], "trained", b"", {"hyp": b"a\n", "ref": b"a\n"}, 1,
     r"error: score: --ref given 2 times \({tmp}/ref, {tmp}/hyp\); give one file", None),
]  # fmt: skip


def run_main(argv: list[str], stdin: bytes, capsys, monkeypatch) -> tuple[int, str, str]:
    """``main(argv)`` with ``stdin`` as standard input: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        main(argv)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)  # what the interpreter does with sys.exit("message")
    out = capsys.readouterr()
    return status, out.out, out.err


def check_stderr(stderr: str, pattern: str | None, status: int) -> None:
    """No traceback, the expected line exactly once, and an error (status != 0) is the last line and alone."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    if pattern is None:
        assert not [line for line in lines if re.search(r"WARNING|ERROR|error:", line)], stderr
        return
    matching = [line for line in lines if re.search(pattern, line)]
    assert len(matching) == 1, f"{pattern!r} not once in:\n{stderr}"
    if status != 0:
        assert lines[-1] == matching[0], stderr
        assert len([line for line in lines if "error" in line.lower()]) == 1, f"printed more than once:\n{stderr}"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, trained_model, tmp_path, capsys, monkeypatch):
    _, argv, variant, stdin, files, status, pattern, expected = case
    model_dir, _ = trained_model
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    names = {"tmp": str(tmp_path), "model": str(MODELS[variant](tmp_path, model_dir))}
    argv = [arg.format(**names) for arg in argv]
    if pattern is not None:
        pattern = pattern.format(**{k: re.escape(v) for k, v in names.items()})
    got_status, stdout, stderr = run_main(argv, stdin, capsys, monkeypatch)
    assert got_status == status, stderr
    check_stderr(stderr, pattern, status)
    if isinstance(expected, str):
        assert re.search(expected, stdout, re.M), stdout
    elif expected is not None:
        hyps = stdout.split("\n")
        assert hyps.pop() == "", "every output line ends in a newline"
        assert len(hyps) == len(expected), stdout
        device = get_device("cpu")
        model, src_sp, trg_sp = load_model(model_dir, device)
        for hyp, src in zip(hyps, expected, strict=True):
            if src is not None:
                [alone] = translate_lines(Translator(model, src_sp, trg_sp, DecodeConfig(beam_size=2), device), [src])
                assert hyp == alone and (hyp == "") == (src.strip() == ""), (src, hyp)


def nmt_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmt", *args]


def test_a_pipe_as_input_file(trained_model):
    """``--input <(cmd)`` or ``/dev/stdin``: a pipe reads as a file (it was "file not found")."""
    model_dir, _ = trained_model
    argv = nmt_command("translate", "--model", str(model_dir), "--beam-size", "2", "--input", "/dev/stdin")
    out = subprocess.run(argv, input="the cat\nthe dog runs\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 2, out.stderr


def test_closed_stdin(trained_model):
    model_dir, _ = trained_model
    out = subprocess.run(
        nmt_command("translate", "--model", str(model_dir)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.close(0),
    )
    assert out.returncode == 1
    check_stderr(out.stderr, r"^error: stdin is closed: pipe the source text in", 1)


def test_closed_output_pipe_ends_quietly(trained_model, toy_corpus):
    """``python -m nmt translate ... | head -1``: the reader is gone before the output is written."""
    model_dir, _ = trained_model
    with open(toy_corpus["test.en"], "rb") as src:
        p = subprocess.Popen(
            nmt_command("translate", "--model", str(model_dir), "--method", "greedy"),
            stdin=src,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        p.stdout.close()
        stderr = p.stderr.read().decode()
        assert p.wait() == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "error" not in stderr.lower(), stderr


# (id, what checkpoints/last.pt is, stderr line)
RESUME_CASES = [
    (
        "the final model.pt",
        lambda m: shutil.copyfile(m / "model.pt", m / "checkpoints/last.pt"),
        r"error: {last}: is a final model file, not a training checkpoint \(no optimizer, scaler, progress, history, "
        r"train_log, rng, window, identity to resume from\)",
    ),
    ("truncated", lambda m: truncate(m / "checkpoints/last.pt"), r"error: {last}: not a readable checkpoint"),
    (
        "a list",
        lambda m: torch.save([1, 2], m / "checkpoints/last.pt"),
        r"error: {last}: not a checkpoint of this toolkit \(it holds a list\)",
    ),
]


@pytest.mark.parametrize("case", RESUME_CASES, ids=[c[0] for c in RESUME_CASES])
def test_bad_resume_checkpoint(case, trained_model, toy_corpus, toy_spm, tmp_path, capsys, monkeypatch):
    """``python -m nmt train`` resumes from ``checkpoints/last.pt``; a wrong file there, with none before it, is one
    line."""
    _, change, pattern = case
    model_dir = tmp_path / "model"
    shutil.copytree(trained_model[0], model_dir)
    (model_dir / "checkpoints/last.prev.pt").unlink()  # the one before it resumes instead (test_training.py)
    change(model_dir)
    argv = ["train", "--model-options", json.dumps(TOY_MODEL), *toy_files(toy_corpus, toy_spm, model_dir).options()]
    status, _, stderr = run_main(argv, b"", capsys, monkeypatch)
    assert status == 1
    check_stderr(stderr, pattern.format(last=re.escape(str(model_dir / "checkpoints/last.pt"))), 1)


META = {"src_lang": "en", "trg_lang": ""}
# (id, change to the training's files, --meta, exit status, stderr line): what `nmt train` says of its inputs.
TRAIN_CASES = [
    ("an empty dev set", {"dev_src": "{tmp}/empty.en", "dev_ref": "{tmp}/empty.de"}, None, 1,
     r"error: {tmp}/empty.en and {tmp}/empty.de: the dev set is empty; validation needs sentence pairs$"),
    ("a meta direction that is none", {}, {**META, "directions": ["ende"]}, 1,
     r"error: --meta.directions: 'ende' is not a direction SRC-TRG such as 'en-de'$"),
    ("a meta direction whose tag the subword model lacks", {}, {**META, "directions": ["en-de", "en-fr"]}, 1,
     r"error: {spm}: <2de>, <2fr> of the directions en-de, en-fr \(the meta\) are no pieces of this source subword "
     r"model; a multilingual model's subword model holds its target languages' tags$"),
    ("a folder holding another training's model", {"model_dir": "{tmp}/other"}, None, 0,
     r"WARNING .*{tmp}/other: training from scratch; {tmp}/other/model.pt, the model of another training, is replaced "
     r"when this one ends$"),
]  # fmt: skip


@pytest.mark.parametrize("case", TRAIN_CASES, ids=[c[0] for c in TRAIN_CASES])
def test_train_bad_input(case, trained_model, toy_corpus, toy_spm, tmp_path, capsys, monkeypatch):
    """Inputs of ``nmt train`` that made a traceback, a misleading line, a model no translation could use, or lost
    another model without a word."""
    _, changes, meta, status, pattern = case
    (tmp_path / "empty.en").write_text("")
    (tmp_path / "empty.de").write_text("")
    shutil.copytree(trained_model[0], tmp_path / "other", ignore=shutil.ignore_patterns("checkpoints"))
    names = {"tmp": str(tmp_path), "spm": str(toy_spm["en"])}
    files = toy_files(toy_corpus, toy_spm, tmp_path / "model")
    files = dataclasses.replace(files, **{key: value.format(**names) for key, value in changes.items()})
    training = {"max_steps": 2, "warmup_steps": 1, "valid_every": 2}
    argv = ["train", "--model-options", json.dumps(TOY_MODEL), "--training", json.dumps(training), *files.options()]
    got_status, _, stderr = run_main([*argv, *(["--meta", json.dumps(meta)] if meta else [])], b"", capsys, monkeypatch)
    assert got_status == status, stderr
    check_stderr(stderr, pattern.format(**{k: re.escape(v) for k, v in names.items()}), status)


@pytest.mark.parametrize("train_data", ["data/train", (["a.en", "b.en"], ["a.de", "b.de"])], ids=["binarized", "text"])
def test_train_files_pass_through_the_command_line(train_data):
    """The options the launcher writes for the processes under torchrun are the files ``train`` reads back."""
    files = TrainFiles(train_data, "dev.en", "dev.de", "en.model", "de.model", "model")
    args = build_parser().parse_args(["train", "--model-options", "{}", *files.options()])
    assert train_files(args) == files


def test_train_options_not_json(capsys, monkeypatch):
    status, _, stderr = run_main(["train", "--model-options", "{arch"], b"", capsys, monkeypatch)
    assert status == 2
    check_stderr(stderr, r"python -m nmt train: error: argument --model-options: not JSON \(", 2)


def test_subword_learns_the_models_that_binarize_takes(toy_corpus, tmp_path, capsys, monkeypatch):
    """Outside the workflow, ``nmt subword`` learns the subword models with the special ids every stage needs."""
    text = ["--src", str(toy_corpus["train.en"]), "--trg", str(toy_corpus["train.de"])]
    models = ["--src-spm", str(tmp_path / "spm/en.model"), "--trg-spm", str(tmp_path / "spm/de.model")]
    argv = ["subword", *text, *models, "--subword", '{"vocab_size": 81, "joint": false}']
    status, _, stderr = run_main(argv, b"", capsys, monkeypatch)
    assert status == 0, stderr
    binarize = ["binarize", *text, *models, "--out", str(tmp_path / "train")]
    status, _, stderr = run_main(binarize, b"", capsys, monkeypatch)
    assert status == 0, stderr
    header = json.loads((tmp_path / "train.json").read_text())
    assert header["pairs"] == 600 and header["src"]["vocab_size"] <= 81 and header["trg"]["vocab_size"] <= 81
    assert (tmp_path / "spm/en.model").read_bytes() != (tmp_path / "spm/de.model").read_bytes()  # not joint
    status, _, stderr = run_main([*argv[:-1], '{"vocab_sise": 81}'], b"", capsys, monkeypatch)
    assert status == 1
    check_stderr(stderr, r"^error: --subword: unknown key 'vocab_sise'", 1)


def test_a_sentencepiece_model_with_other_special_ids_names_the_remedy(toy_corpus, tmp_path, capsys, monkeypatch):
    """sentencepiece's defaults (no PAD, UNK 0, BOS 1, EOS 2) are not ours: one line saying how to learn a model."""
    spm.SentencePieceTrainer.train(
        input=str(toy_corpus["train.en"]), model_prefix=str(tmp_path / "plain"), vocab_size=30, minloglevel=2
    )
    model = str(tmp_path / "plain.model")
    text = ["--src", str(toy_corpus["train.en"]), "--trg", str(toy_corpus["train.de"])]
    argv = ["binarize", *text, "--src-spm", model, "--trg-spm", model, "--out", str(tmp_path / "train")]
    status, _, stderr = run_main(argv, b"", capsys, monkeypatch)
    assert status == 1
    remedy = r"learn the model with `nmt subword` \(or sentencepiece with pad_id=0 unk_id=1 bos_id=2 eos_id=3\)$"
    pattern = rf"^error: {re.escape(model)}: special ids .*: {remedy}"
    check_stderr(stderr, pattern, 1)


# The options users of fairseq, OpenNMT-py and Marian expect of ``translate``.
SRC = ["the big red dog runs", "a small woman eats", "", "the cat sleeps"]


def one_by_one(model_dir: Path, lines: list[str], **config) -> list[str]:
    """The 1-best translation of every line, from the library."""
    device = get_device("cpu")
    model, src_sp, trg_sp = load_model(model_dir, device)
    return translate_lines(Translator(model, src_sp, trg_sp, DecodeConfig(**config), device), lines)


def test_nbest_lists_with_scores(trained_model, capsys, monkeypatch):
    model_dir, _ = trained_model
    argv = ["translate", "--model", str(model_dir), "--beam-size", "4", "--nbest", "3"]
    status, stdout, stderr = run_main(argv, "".join(s + "\n" for s in SRC).encode(), capsys, monkeypatch)
    assert status == 0, stderr
    rows = [line.split("\t") for line in stdout.splitlines()]
    assert all(len(row) == 4 for row in rows), stdout
    best = one_by_one(model_dir, SRC, beam_size=4)
    for number, src in enumerate(SRC, 1):
        mine = [(hyp, float(score), float(logprob)) for n, hyp, score, logprob in rows if int(n) == number]
        if not src:
            assert mine == [("", 0.0, 0.0)]
            continue
        assert len(mine) == 3 and len({hyp for hyp, _, _ in mine}) == 3, mine
        assert mine[0][0] == best[number - 1]
        assert [score for _, score, _ in mine] == sorted((score for _, score, _ in mine), reverse=True)
        assert all(logprob <= score < 0 for _, score, logprob in mine)  # length penalty >= 1 for alpha = 1
    assert [int(row[0]) for row in rows] == sorted(int(row[0]) for row in rows), "in input order"


def test_nbest_larger_than_the_beam(trained_model, capsys, monkeypatch):
    argv = ["translate", "--model", str(trained_model[0]), "--beam-size", "2", "--nbest", "3"]
    status, _, stderr = run_main(argv, b"the cat\n", capsys, monkeypatch)
    assert status == 1
    check_stderr(stderr, r"^error: translate: --nbest 3 needs --method beam and --beam-size >= 3$", 1)


def test_ctranslate2_runtime_translates_greedy_and_ctranslate2_beam_and_refuses_gnmt_beam(
    trained_model, capsys, monkeypatch
):
    """Without --method the ctranslate2 runtime searches greedily, as torch does token for token; beam search with
    --length-normalization ctranslate2 too, n-best lists included; GNMT's beam search is refused."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    argv = ["translate", "--model", str(trained_model[0]), "--runtime", "ctranslate2", "--method", "beam"]
    status, _, stderr = run_main(argv, b"the cat\n", capsys, monkeypatch)
    assert status == 1
    check_stderr(stderr, r"^error: translate\.runtime: ctranslate2 runs beam search with length_normalization ", 1)
    beam = ["--method", "beam", "--length-normalization", "ctranslate2", "--nbest", "2"]
    out = {}
    for runtime, method in (("torch", ["--method", "greedy"]), ("ctranslate2", []), ("torch", beam), ("auto", beam)):
        argv = ["translate", "--model", str(trained_model[0]), *method, "--runtime", runtime]
        status, out[runtime, len(method)], stderr = run_main(argv, b"the dog runs\n\nthe cat\n", capsys, monkeypatch)
        assert status == 0, stderr
    assert out["ctranslate2", 0] == out["torch", 2] and len(out["torch", 2].splitlines()) == 3
    nbest = {runtime: [row.split("\t")[:2] for row in out[runtime, 6].splitlines()] for runtime in ("torch", "auto")}
    assert nbest["auto"] == nbest["torch"] and len(nbest["torch"]) == 5  # 2 + 1 (the empty line) + 2


def test_an_export_is_a_model_of_the_ctranslate2_runtime(trained_model, tmp_path, capsys, monkeypatch):
    """``nmt export MODEL OUT``, then ``nmt translate --model OUT --runtime
    ctranslate2``: the greedy output of the model directory; the torch runtime says what OUT is and what to add."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, export = str(trained_model[0]), tmp_path / "en-de.ct2"
    status, stdout, stderr = run_main(["export", model_dir, str(export)], b"", capsys, monkeypatch)
    assert status == 0 and stdout == f"{export}\n", stderr
    src = b"the dog runs\n\nthe big cat sleeps\n"
    status, torch_out, _ = run_main(["translate", "--model", model_dir, "--method", "greedy"], src, capsys, monkeypatch)
    assert status == 0
    argv = ["translate", "--model", str(export), "--runtime", "ctranslate2"]
    status, ct2_out, stderr = run_main(argv, src, capsys, monkeypatch)
    assert status == 0, stderr
    assert ct2_out == torch_out and len(ct2_out.splitlines()) == 3
    status, auto_out, stderr = run_main([*argv[:-1], "auto"], src, capsys, monkeypatch)  # an export: greedy as well
    assert status == 0 and auto_out == torch_out, stderr
    status, _, stderr = run_main(["translate", "--model", str(export)], src, capsys, monkeypatch)
    assert status == 1
    check_stderr(
        stderr,
        rf"^error: {re.escape(str(export))}: a CTranslate2 export \(model\.bin\), not a model "
        r"directory \(model\.pt\): translate with it with --runtime ctranslate2$",
        1,
    )


def test_input_and_output_files(trained_model, tmp_path, capsys, monkeypatch):
    model_dir, _ = trained_model
    (tmp_path / "in.en").write_text("".join(s + "\n" for s in SRC))
    files = ["--input", str(tmp_path / "in.en"), "--output", str(tmp_path / "out/hyp.de")]
    argv = ["translate", "--model", str(model_dir), *files, "--beam-size", "2"]
    status, stdout, stderr = run_main(argv, b"not this\n", capsys, monkeypatch)
    assert status == 0 and stdout == "", stderr
    assert (tmp_path / "out/hyp.de").read_text().splitlines() == one_by_one(model_dir, SRC, beam_size=2)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["hyp.de"], "no temp file left"
    argv[4] = str(tmp_path / "missing.en")
    status, _, stderr = run_main(argv, b"", capsys, monkeypatch)
    assert status == 1
    check_stderr(stderr, rf"^error: {re.escape(str(tmp_path / 'missing.en'))}: file not found$", 1)


def test_max_len_options_cut_the_output(trained_model, capsys, monkeypatch):
    model_dir, _ = trained_model
    src = "the big red dog runs and the small cat sleeps"
    argv = ["translate", "--model", str(model_dir), "--method", "greedy", "--max-len-a", "0", "--max-len-b", "3"]
    status, stdout, stderr = run_main(argv, (src + "\n").encode(), capsys, monkeypatch)
    assert status == 0, stderr
    trg_sp = load_model(model_dir, get_device("cpu"))[2]
    full = one_by_one(model_dir, [src], method="greedy")[0]
    assert len(trg_sp.encode(full)) > 2
    assert stdout == one_by_one(model_dir, [src], method="greedy", max_len_a=0, max_len_b=3)[0] + "\n"
    assert len(trg_sp.encode(stdout.strip())) <= 2 < len(trg_sp.encode(full)), "2 subwords and EOS"


def test_bf16_on_cpu(trained_model, capsys, monkeypatch):
    argv = ["translate", "--model", str(trained_model[0]), "--method", "greedy", "--bf16"]
    status, stdout, stderr = run_main(argv, b"the cat sleeps\nthe dog\n", capsys, monkeypatch)
    assert status == 0 and len(stdout.splitlines()) == 2, stderr


def test_streaming_through_a_pipe(trained_model):
    """Each line is answered before the next is sent, as an interactive user or a pipeline needs."""
    model_dir, _ = trained_model
    expected = one_by_one(model_dir, SRC, method="greedy")
    p = subprocess.Popen(
        nmt_command("translate", "--model", str(model_dir), "--method", "greedy", "--window", "1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for src, hyp in zip(SRC, expected, strict=True):
            p.stdin.write((src + "\n").encode())
            p.stdin.flush()
            ready, _, _ = select.select([p.stdout], [], [], 120)
            assert ready, f"no output for {src!r} while the input stays open"
            assert p.stdout.readline().decode() == hyp + "\n"
        p.stdin.close()
        assert p.wait(60) == 0, p.stderr.read().decode()
    finally:
        p.kill()


def test_version_and_console_script_name():
    import importlib.metadata

    out = subprocess.run(nmt_command("--version"), capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == f"python -m nmt {importlib.metadata.version('nmt')}\n"
    # What the `nmt` console script runs (pip writes it into the environment's bin/).
    script = "import sys; from nmt.__main__ import main; sys.argv[0] = 'bin/nmt'; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", script, "translate", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage: nmt translate"), out.stdout
    assert "(default: 5)" in out.stdout, "help shows the defaults"
    out = subprocess.run(nmt_command("--help"), capture_output=True, text=True)
    assert out.stdout.startswith("usage: python -m nmt"), out.stdout


FROZEN = """
import gc
import torch
from nmt.entry import entry_point
with entry_point():
    on_entry = gc.get_freeze_count()
    made_in_the_job = [[] for _ in range(1000)]
    collected = gc.collect(2) >= 0 and gc.get_freeze_count() == on_entry  # a collection leaves them frozen
print(on_entry, gc.get_freeze_count(), collected)
"""


def test_an_entry_point_freezes_what_exists_out_of_the_garbage_collector():
    """Frozen on entry and on exit, torch's objects are not traversed by full collections, nor as the process ends
    (0.3-0.4 s of every process: benchmarks/README.md, "What made it faster")."""
    out = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    on_entry, on_exit, collected = out.stdout.split()
    assert int(on_entry) > 100_000, "torch's import alone makes about 170,000 objects"
    assert int(on_exit) > int(on_entry) + 900 and collected == "True", "the job's 1,001 lists are frozen on exit"


def test_sigterm_removes_the_output_being_written(trained_model, tmp_path):
    """``kill`` or ``timeout`` (SIGTERM) stops a translation as Ctrl-C does: no half output, no temp file left."""
    model_dir, _ = trained_model
    out = tmp_path / "out" / "hyp.de"
    argv = nmt_command("translate", "--model", str(model_dir), "--window", "1", "--output", str(out))
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write("the cat\n")
    proc.stdin.flush()  # the process answers it, then waits for the next line with its output open
    deadline = time.monotonic() + 60
    while not list(out.parent.glob(".*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    proc.terminate()
    assert proc.wait(timeout=60) == 143, proc.stderr.read()
    assert list(out.parent.iterdir()) == []
