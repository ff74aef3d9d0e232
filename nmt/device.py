"""The device a process computes on and its precision: autocast, bfloat16 decoding weights, float16 loss scaling."""

import torch

from nmt.errors import DataError


def get_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DataError("device 'cuda' was requested but no CUDA device is available")
    return torch.device(name)


def autocast_dtype(device_type: str, bf16: str, bf16_supported: bool) -> torch.dtype | None:
    """The reduced precision of autocast, None for float32.

    ``auto``: bfloat16 on CUDA GPUs that have it (Ampere and later), float16 on older ones (training then
    scales the loss, see :func:`grad_scaler`), float32 on CPU; ``on``: bfloat16 anywhere; ``off``: float32.
    """
    if bf16 == "off" or (bf16 == "auto" and device_type != "cuda"):
        return None
    return torch.bfloat16 if bf16 == "on" or bf16_supported else torch.float16


def mixed_precision(device: torch.device, bf16: str = "auto") -> torch.dtype | None:
    """:func:`autocast_dtype` of this device."""
    return autocast_dtype(device.type, bf16, device.type == "cuda" and torch.cuda.is_bf16_supported())


def autocast(device: torch.device, bf16: str = "auto"):
    """Autocast context of :func:`mixed_precision` (disabled for float32)."""
    dtype = mixed_precision(device, bf16)
    return torch.autocast(device_type=device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def for_decoding(model: torch.nn.Module, device: torch.device, bf16: str = "auto") -> torch.nn.Module:
    """``model`` in eval mode, with bfloat16 weights where :func:`mixed_precision` is bfloat16.

    Autocast casts each weight again at every decoding step (its cast cache lasts one ``with`` block)
    and keeps the activations between layers in float32; bfloat16 weights do neither, and decode
    faster at the same BLEU (benchmarks/README.md, "Measurements behind the code"). float16 stays under
    autocast, whose float32 operations guard its narrow range.
    """
    if mixed_precision(device, bf16) == torch.bfloat16:
        model = model.to(torch.bfloat16)
    return model.eval()


def grad_scaler(device: torch.device, bf16: str = "auto") -> torch.amp.GradScaler:
    """Loss scaling for float16 training (its gradients underflow without); a pass-through otherwise.

    Its scale changes as training goes, so a training checkpoint holds its state
    (:class:`nmt.training.state.TrainState`).
    """
    return torch.amp.GradScaler(device.type, enabled=mixed_precision(device, bf16) == torch.float16)
