"""Mixed precision: which autocast dtype for which device, and loss scaling only where float16 needs it."""

import os
import subprocess
import sys

import pytest
import torch
from conftest import TOY_MODEL, run_training

import nmt.device
import nmt.training.loop as loop
from nmt.checkpoint import TRAINING_KEYS, load_checkpoint
from nmt.device import autocast, autocast_dtype, grad_scaler


@pytest.mark.parametrize(
    "device_type, bf16, bf16_supported, expected",
    [
        ("cuda", "auto", True, torch.bfloat16),  # Ampere and later
        ("cuda", "auto", False, torch.float16),  # V100, T4, ...: float16 with a GradScaler
        ("cuda", "on", False, torch.bfloat16),  # asked for
        ("cuda", "off", True, None),
        ("cpu", "auto", False, None),  # CPU: float32 unless asked for
        ("cpu", "on", False, torch.bfloat16),
        ("cpu", "off", False, None),
    ],
)
def test_autocast_dtype(device_type, bf16, bf16_supported, expected):
    assert autocast_dtype(device_type, bf16, bf16_supported) == expected


@pytest.mark.parametrize("bf16", ["auto", "on", "off"])
def test_cpu_training_does_not_scale_the_loss(bf16):
    cpu = torch.device("cpu")
    assert not grad_scaler(cpu, bf16).is_enabled()
    loss = torch.tensor(2.0)
    assert grad_scaler(cpu, bf16).scale(loss) is loss
    with autocast(cpu, bf16):
        dtype = torch.ones(2, 2).matmul(torch.ones(2, 2)).dtype
    assert dtype == (torch.bfloat16 if bf16 == "on" else torch.float32)


@pytest.mark.parametrize("arch", ["transformer", "rnn", "convs2s"])
def test_bf16_training_validates_with_every_search_under_autocast(toy_corpus, toy_spm, tmp_path, arch):
    """Validation decodes the training model (float32 weights) under autocast, as bfloat16 training does on a GPU
    by default: every search steps the decoder with bfloat16 activations and float32 states from the encoder."""
    from nmt.config import DecodeConfig
    from nmt.decoding.translation import Translator, translate_lines
    from nmt.model_dir import load_model

    model = TOY_MODEL if arch == "transformer" else {"arch": arch, "size": "tiny"}
    summary = run_training(toy_corpus, toy_spm, tmp_path, model=model, max_steps=4, valid_every=4, bf16="on")
    assert summary["steps"] == 4 and 0 <= summary["valid"]["bleu"] <= 100
    fp32, src_sp, trg_sp = load_model(tmp_path, torch.device("cpu"))
    src = toy_corpus["dev.en"].read_text().splitlines()[:8]
    for method in ("beam", "greedy", "sample"):
        translator = Translator(fp32, src_sp, trg_sp, DecodeConfig(method=method), torch.device("cpu"), "on")
        hyps = translate_lines(translator, src)
        assert len(hyps) == len(src), method


def test_float16_loss_scaling_is_on_the_training_device(monkeypatch):
    """The scaler works on the device that trains (a CUDA scaler on a CPU-only machine disables itself)."""
    monkeypatch.setattr(nmt.device, "mixed_precision", lambda device, bf16="auto": torch.float16)
    scaler = grad_scaler(torch.device("cpu"))
    assert scaler.is_enabled() and scaler.state_dict()["scale"] == 2.0**16


def overflowing_scaler(device: torch.device, bf16: str = "auto") -> torch.amp.GradScaler:
    """A loss scaler at the top of float32's range that raises its scale again after every 2 good updates."""
    return torch.amp.GradScaler(device.type, init_scale=2.0**127, growth_interval=2)


def test_overflowed_updates_are_not_counted_and_resume_exactly(toy_corpus, toy_spm, tmp_path, monkeypatch):
    """An update skipped for overflowed gradients does not count as one (step, schedule, tokens), as in fairseq,
    and last.pt holds the loss scaler's state: a resumed run ends where an uninterrupted one does.

    Overflows come and go as in float16 training, here on a CPU in float32: the scaler starts at the top of
    float32's range and grows again after 2 good updates, and the loss is 1024 times larger (Adam hardly
    notices: it divides the gradients by their root mean square).
    """
    monkeypatch.setattr("nmt.training.trainer.grad_scaler", overflowing_scaler)
    batch_loss = loop.batch_loss
    monkeypatch.setattr(loop, "batch_loss", lambda trainer, batch: batch_loss(trainer, batch) * 1024.0)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    options = {"valid_every": 10, "log_every": 5, "checkpoint_every": 5}
    summary = run_training(toy_corpus, toy_spm, straight, max_steps=20, **options)
    a = load_checkpoint(straight / "checkpoints/last.pt", keys=TRAINING_KEYS)
    adam_steps = {int(p["step"]) for p in a["optimizer"]["state"].values()}
    assert adam_steps == {a["progress"]["step"]} == {20} == {summary["steps"]}, "the updates Adam made"
    assert a["progress"]["skipped"] == summary["skipped_updates"] > 5
    assert a["scaler"]["scale"] < 2.0**127 and a["scaler"]["growth_interval"] == 2

    run_training(toy_corpus, toy_spm, resumed, max_steps=10, **options)
    run_training(toy_corpus, toy_spm, resumed, max_steps=20, **options)
    b = load_checkpoint(resumed / "checkpoints/last.pt", keys=TRAINING_KEYS)
    assert b["scaler"] == a["scaler"]
    assert b["progress"] == a["progress"] | {"train_seconds": b["progress"]["train_seconds"]}
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=0, msg=name)


def float16_scaler(device: torch.device, bf16: str = "auto") -> torch.amp.GradScaler:
    """A float16 loss scaler that overflows from time to time: a high start, growth after 2 good updates."""
    return torch.amp.GradScaler(device.type, init_scale=2.0**24, growth_interval=2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="float16 loss scaling of a GPU")
def test_float16_training_on_a_gpu_counts_real_updates_and_saves_the_scaler(toy_corpus, toy_spm, tmp_path, monkeypatch):
    """Real float16 autocast (also on a GPU with bfloat16), a scaler that overflows from time to time."""
    monkeypatch.setattr(nmt.device, "mixed_precision", lambda device, bf16="auto": torch.float16)
    monkeypatch.setattr("nmt.training.trainer.grad_scaler", float16_scaler)
    summary = run_training(toy_corpus, toy_spm, tmp_path, max_steps=30, valid_every=30, device="cuda")
    ckpt = load_checkpoint(tmp_path / "checkpoints/last.pt", keys=TRAINING_KEYS)
    assert {int(p["step"]) for p in ckpt["optimizer"]["state"].values()} == {summary["steps"]} == {30}
    assert summary["skipped_updates"] > 0 and ckpt["scaler"]["growth_interval"] == 2


@pytest.mark.parametrize(("bf16", "dtype"), [("on", torch.bfloat16), ("off", torch.float32), ("auto", torch.float32)])
def test_decoding_casts_the_weights_instead_of_autocasting(trained_model, bf16, dtype):
    """bfloat16 decoding loads bfloat16 weights (autocast would cast them at every step) and still translates."""
    from conftest import make_toy_corpus

    from nmt.config import DecodeConfig
    from nmt.decoding.ensemble import load_ensemble
    from nmt.decoding.translation import Translator, translate_lines

    model_dir, _ = trained_model
    cpu = torch.device("cpu")
    model, src_sp, trg_sp = load_ensemble([model_dir], cpu, bf16)
    assert {p.dtype for p in model.parameters()} == {dtype} and not model.training
    src, ref = make_toy_corpus(40, seed=21)
    config = DecodeConfig(method="beam", beam_size=3)
    hyps = translate_lines(Translator(model, src_sp, trg_sp, config, cpu, bf16), src)
    fp32, *_ = load_ensemble([model_dir], cpu, "off")
    fp32_hyps = translate_lines(Translator(fp32, src_sp, trg_sp, config, cpu, "off"), src)
    correct = [sum(h == r for h, r in zip(hs, ref, strict=True)) for hs in (hyps, fp32_hyps)]
    assert correct[0] >= correct[1] - 3 and correct[1] >= 25, correct  # the toy task is learnt in either precision


BF16_UPDATES_OF_MANY_LENGTHS = """
import resource, torch
import nmt
from nmt.models.seq2seq import build_model
from nmt.device import autocast
torch.set_num_threads(1)
torch.manual_seed(0)
model = build_model({"arch": "transformer", "enc_layers": 1, "dec_layers": 1}, 1000, 1000, True)
cpu = torch.device("cpu")
def update(length):  # batches of varying length give products of many shapes
    src, trg = torch.randint(4, 1000, (8, length)), torch.randint(4, 1000, (8, length + 1))
    with autocast(cpu, "on"):
        logits = model(src, trg)
    logits.float().sum().backward()
update(5)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for length in range(6, 66):
    update(length)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def _growth_mb(env: dict[str, str]) -> int:
    """Peak RSS growth (MB) over 60 bf16 updates of a small Transformer, each on a batch of another length."""
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"} | env
    out = subprocess.run([sys.executable, "-c", BF16_UPDATES_OF_MANY_LENGTHS], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def _onednn_runs_bf16_products() -> bool:
    """Whether this CPU's bf16 matrix products go through oneDNN (and its primitive cache) at all."""
    code = "import torch; x = torch.ones(64, 256, dtype=torch.bfloat16); x @ x.T"
    env = os.environ | {"ONEDNN_VERBOSE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return ",exec,cpu,matmul," in out.stdout + out.stderr


def test_bf16_updates_of_many_lengths_do_not_fill_onednn_cache():
    """Importing nmt caps oneDNN's primitive cache, which keeps a primitive per shape of a bf16 product
    (benchmarks/history.md, "What made it faster", "oneDNN's primitive cache")."""
    if not _onednn_runs_bf16_products():
        pytest.skip("this CPU runs bf16 matrix products without oneDNN, so there is no primitive cache to fill")
    capped, torch_default = _growth_mb({}), _growth_mb({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024"})
    if torch_default < 100:
        pytest.skip(f"oneDNN's primitives keep little memory on this CPU ({torch_default} MB uncapped)")
    assert capped < 0.8 * torch_default, (capped, torch_default)


def test_a_users_onednn_cache_setting_wins():
    code = "import os, nmt; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    env = os.environ | {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "512"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "512"
