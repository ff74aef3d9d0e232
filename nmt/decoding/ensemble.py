"""Ensembles of trained models that decode as one model: the members' log-probabilities are averaged at every step.

Legend: B batch (or batch times beam), S source length, V target vocabulary.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
import torch.nn.functional as F
from torch import nn

from nmt.device import for_decoding
from nmt.errors import DataError
from nmt.model_dir import SRC_SPM, TRG_SPM, load_model
from nmt.models.seq2seq import Seq2Seq


class Ensemble(nn.Module):
    """Several :class:`~nmt.models.seq2seq.Seq2Seq` models of any architectures behind one decoder contract.

    At each step every member scores the next token given the same source and target prefix, and
    the ensemble returns the mean of the members' log-probabilities,
    ``mean_m log_softmax(logits_m)`` (B, V) — the log of the members' geometric mean probability,
    which is not normalised. Search applies ``log_softmax`` (beam), ``softmax`` (sampling) or
    ``argmax`` (greedy) to it as to logits, so beam search and sampling use the renormalised
    geometric mean ``prod_m p_m ** (1/M) / Z``, and greedy search its argmax (Z does not matter there).
    With one member this is the member's own distribution. This is the log-linear combination;
    averaging the probabilities instead (a linear mixture) would be the other common choice.
    """

    def __init__(self, members: Sequence[Seq2Seq]) -> None:
        """:param members: models with the same source and target vocabulary sizes (and subword models)"""
        super().__init__()
        if not members:
            raise DataError("an ensemble needs at least one model")
        sizes = [(m.spec["src_vocab"], m.spec["trg_vocab"]) for m in members]
        if len(set(sizes)) > 1:
            raise DataError(f"ensemble members disagree on (source, target) vocabulary sizes: {sizes}")
        self.members = nn.ModuleList(members)

    def init_state(self, src: torch.Tensor) -> list[Any]:
        """Encode ``src`` (B, S) with every member; the state is the list of the members' states.

        A list of batch-first states is itself one, so :func:`nmt.models.decoding_state.reorder_state` reorders it.
        """
        return [member.init_state(src) for member in self.members]

    def step(self, trg_prev: torch.Tensor, state: list[Any]) -> tuple[torch.Tensor, list[Any]]:
        """Mean over members of their log-probabilities (B, V) of the next token after ``trg_prev`` (B,).

        :return: ``mean_m log_softmax(logits_m)`` in float32, shape (B, V), and the next state
        """
        lprobs, next_state = [], []
        for member, member_state in zip(self.members, state, strict=True):
            logits, member_state = member.step(trg_prev, member_state)  # (B, V)
            lprobs.append(F.log_softmax(logits.float(), dim=-1))
            next_state.append(member_state)
        return torch.stack(lprobs).mean(dim=0), next_state  # (M, B, V) -> (B, V)


def load_ensemble(
    model_dirs: Sequence[str | Path], device: torch.device, bf16: str = "auto"
) -> tuple[Seq2Seq | Ensemble, spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """Load one model directory as the plain model, or several as an :class:`Ensemble`.

    The members must use identical source and target subword models (compared byte for byte as
    serialized protos), since they read one segmentation of the source and write one of the target.

    :param model_dirs: model directories (model.pt, src.model, trg.model) written by training
    :param bf16: the precision of decoding (:func:`nmt.device.for_decoding` casts the weights)
    :return: the model, and the first directory's source and target subword models
    """
    if not model_dirs:
        raise DataError("no model directory given")
    first, *others = model_dirs
    model, src_sp, trg_sp = load_model(first, device)
    if not others:
        return for_decoding(model, device, bf16), src_sp, trg_sp
    members = [model]
    for model_dir in others:
        member, member_src_sp, member_trg_sp = load_model(model_dir, device)
        for side, name, sp, member_sp in (
            ("source", SRC_SPM, src_sp, member_src_sp),
            ("target", TRG_SPM, trg_sp, member_trg_sp),
        ):
            if sp.serialized_model_proto() != member_sp.serialized_model_proto():
                raise DataError(
                    f"{Path(first) / name} and {Path(model_dir) / name} differ: "
                    f"an ensemble needs the same {side} subword model in every model directory"
                )
        members.append(member)
    return for_decoding(Ensemble(members), device, bf16), src_sp, trg_sp
