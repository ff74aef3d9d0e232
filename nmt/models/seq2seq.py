"""The encoder-decoder model, the decoder contract that search relies on, and the architecture table.

Every architecture provides an encoder and a decoder with this contract:

- ``encoder(src)`` with ``src`` (B, S) returns a dict of batch-first tensors;
- ``decoder(trg_in, enc)`` returns teacher-forced logits (B, T, V);
- ``decoder.init_state(enc)`` returns the decoding state before the first target token;
- ``decoder.step(trg_prev, state)`` takes the previous tokens (B,) and returns logits (B, V) and
  the next state.

A state is a dict whose tensors (also inside lists and tuples) all have the batch (or beam)
as their first dimension, so that search can select and reorder hypotheses without knowing the
architecture (:mod:`nmt.models.decoding_state`). Non-tensor values (step counters) are shared. Tensors wrapped
in :class:`~nmt.models.decoding_state.PerSentence` have one row per sentence even when the others have one per
hypothesis: beam search keeps them once for a sentence's K hypotheses, whose rows are consecutive. Tensors
wrapped in :class:`~nmt.models.decoding_state.Unmoved` are left as they are: the decoder reads their rows through an
index tensor of the state.

Legend: B batch, S source length, T target length, V vocabulary.
"""

import dataclasses
import logging
from typing import Any, Protocol

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from nmt.model_config import resolve_model_options
from nmt.models.convs2s import build_convs2s
from nmt.models.rnn import build_rnn
from nmt.models.transformer import build_transformer

log = logging.getLogger(__name__)

# name -> builder(config, src_vocab, trg_vocab, shared_vocab) -> (encoder, decoder); the config dataclasses
# and sizes are in nmt.model_config (without torch, for the workflow's parsing).
ARCHITECTURES = {"rnn": build_rnn, "convs2s": build_convs2s, "transformer": build_transformer}


class DecodingModel(Protocol):
    """What search and translation need of a model: the decoder contract and ``nn.Module``'s train/eval switch.

    :class:`Seq2Seq` and :class:`nmt.decoding.ensemble.Ensemble` both provide it.
    """

    training: bool

    def init_state(self, src: torch.Tensor) -> Any: ...

    def step(self, trg_prev: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """Logits (B, V) after ``trg_prev`` (B,), and the next state.

        The logits are a tensor of their own (no view of one the model keeps), which search changes in place.
        The state's tensors are never changed in place: a tensor that ``step`` returns as it got it
        is one of the initial state's (e.g. the encoder output), which beam search copies less often. What
        ``state`` holds in :class:`~nmt.models.decoding_state.Unmoved` belongs to the step, which may release it: each
        state is stepped from once.
        """
        ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


class Seq2Seq(nn.Module):
    """An encoder-decoder translation model of any architecture in :data:`ARCHITECTURES`."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, spec: dict[str, Any]) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.spec = spec  # everything build_model needs to rebuild this model from a checkpoint

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode ``src`` (B, S)."""
        return self.encoder(src)

    def decode(self, trg_in: torch.Tensor, enc: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced logits (B, T, V)."""
        return self.decoder(trg_in, enc)

    def forward(self, src: torch.Tensor, trg_in: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of ``trg_in`` (B, T) given ``src`` (B, S): teacher forcing, for training."""
        return self.decode(trg_in, self.encode(src))

    def init_state(self, src: torch.Tensor) -> dict[str, Any]:
        """Encode ``src`` once and return the decoder state for the first step."""
        return self.decoder.init_state(self.encode(src))

    def step(self, trg_prev: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Logits (B, V) of the next target token."""
        return self.decoder.step(trg_prev, state)

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(
    options: dict[str, Any], src_vocab: int, trg_vocab: int, shared_vocab: bool, where: str = "model"
) -> Seq2Seq:
    """Build a model from its config options.

    :param options: ``arch``, optional ``size`` and architecture keys overriding the size
    :param src_vocab: source vocabulary size
    :param trg_vocab: target vocabulary size
    :param shared_vocab: whether source and target use the same subword model
    :param where: config path for error messages
    """
    arch, config = resolve_model_options(options, where)
    encoder, decoder = ARCHITECTURES[arch](config, src_vocab, trg_vocab, shared_vocab)
    spec = {
        "arch": arch,
        "config": dataclasses.asdict(config),
        "src_vocab": src_vocab,
        "trg_vocab": trg_vocab,
        "shared_vocab": shared_vocab,
    }
    model = Seq2Seq(encoder, decoder, spec)
    unshared = getattr(config, "share_embeddings", False) and not shared_vocab
    note = " (embeddings not shared: the source and target subword models differ)" if unshared else ""
    log.info("built %s with %d parameters: %s%s", arch, model.n_parameters(), spec["config"], note)
    return model


def model_from_spec(spec: dict[str, Any], weights: dict[str, torch.Tensor] | None = None) -> Seq2Seq:
    """Rebuild the model described by ``Seq2Seq.spec``: untrained, or with ``weights`` (a state dict) as its parameters.

    With ``weights`` the model is built on the meta device, unfilled (:class:`Unfilled`), and the weights become
    its parameters without a copy: a model loaded from a memory-mapped file holds no second copy of them.
    A parameter shared under several names (a tied output projection) is shared again, so that it stays one
    tensor when the model is cast or moved.

    :raises RuntimeError: if ``weights`` lack a parameter of the model, have one it lacks, or one of another shape
    """
    if weights is None:
        options = {"arch": spec["arch"], **spec["config"]}
        for key, value in options.items():
            if isinstance(value, list):
                options[key] = tuple(value)
        return build_model(options, spec["src_vocab"], spec["trg_vocab"], spec["shared_vocab"], where="checkpoint")
    with torch.device("meta"), Unfilled():
        model = model_from_spec(spec)
    names_of: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(param), []).append(name)
    dtypes = {name: t.dtype for name, t in model.state_dict().items()}  # assign keeps the file's dtype: cast to ours
    model.load_state_dict({name: t.to(dtypes.get(name, t.dtype)) for name, t in weights.items()}, assign=True)
    for first, *aliases in names_of.values():
        for name in aliases:
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner), attr, model.get_parameter(first))
    return model


class Unfilled(TorchFunctionMode):
    """Initialisers do nothing: for a model built on the meta device to receive the weights of a file.

    Meta tensors hold no values to fill. Skipping the calls also spares the process torch's Python meta kernels,
    which ``normal_`` loads (about 70 MiB and 800 modules).
    """

    FILLS = frozenset({torch.Tensor.normal_, torch.Tensor.uniform_, torch.Tensor.fill_, torch.Tensor.zero_})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        filled = args[0] if args else kwargs.get("tensor")  # torch.nn.init passes it by name
        initialiser = func in self.FILLS or getattr(func, "__module__", None) == "torch.nn.init"
        if initialiser and isinstance(filled, torch.Tensor) and filled.is_meta:
            return filled
        return func(*args, **kwargs)
