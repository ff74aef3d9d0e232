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
