"""Mixed precision: which autocast dtype for which device, and loss scaling only where float16 needs it."""

import pytest
import torch

from nmt.model_dir import autocast, autocast_dtype, grad_scaler


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


@pytest.mark.parametrize(("bf16", "dtype"), [("on", torch.bfloat16), ("off", torch.float32), ("auto", torch.float32)])
def test_decoding_casts_the_weights_instead_of_autocasting(trained_model, bf16, dtype):
    """bfloat16 decoding loads bfloat16 weights (autocast would cast them at every step) and still translates."""
    from conftest import make_toy_corpus

    from nmt.config import DecodeConfig
    from nmt.ensemble import load_ensemble
    from nmt.translation import translate_lines

    model_dir, _ = trained_model
    cpu = torch.device("cpu")
    model, src_sp, trg_sp = load_ensemble([model_dir], cpu, bf16)
    assert {p.dtype for p in model.parameters()} == {dtype} and not model.training
    src, ref = make_toy_corpus(40, seed=21)
    config = DecodeConfig(method="beam", beam_size=3)
    hyps = translate_lines(model, src_sp, trg_sp, src, config, cpu, bf16)
    fp32, *_ = load_ensemble([model_dir], cpu, "off")
    fp32_hyps = translate_lines(fp32, src_sp, trg_sp, src, config, cpu, "off")
    correct = [sum(h == r for h, r in zip(hs, ref, strict=True)) for hs in (hyps, fp32_hyps)]
    assert correct[0] >= correct[1] - 3 and correct[1] >= 25, correct  # the toy task is learnt in either precision
