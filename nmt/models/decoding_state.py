"""The decoding state that search selects and reorders without knowing the architecture.

See :mod:`nmt.models.seq2seq` for the decoder contract: a state is a dict whose tensors (also inside lists and
tuples) have the batch (or beam) as their first dimension; :class:`PerSentence` marks those with one row per
sentence, :class:`Unmoved` those that search leaves as they are.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import torch


@dataclasses.dataclass(frozen=True)
class PerSentence:
    """State tensors (in ``value``, at any depth) with one row per sentence, shared by the sentence's hypotheses.

    A decoder gets them with as many rows as the other state tensors (B), or, in beam search, with one row for
    each block of K consecutive rows (B / K): e.g. the encoder's keys and values for cross-attention, which are
    the same for every hypothesis of a sentence and need not be copied K times.
    """

    value: Any


@dataclasses.dataclass(frozen=True)
class Unmoved:
    """State tensors (in ``value``, at any depth) that search neither reorders nor selects: the decoder takes their
    rows through an index, a (B,) tensor of the state that search moves like any other.

    For tensors that the next step copies anyway, such as a Transformer's key/value caches, which each step
    extends by a position: the step takes the rows it needs in that copy, where search would have copied
    the whole cache once more to reorder it (benchmarks/README.md, "What made it faster"). The step may also
    release them from the state it was given once it holds what it needs of them: a state is stepped from once.
    """

    value: Any


def map_tensors(
    state: Any,
    fn: Callable[[torch.Tensor], torch.Tensor],
    per_sentence: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Any:
    """``state`` with every tensor ``t`` in it, at any depth of dicts, lists and tuples, replaced by ``fn(t)``; those
    in :class:`Unmoved` stay.

    :param per_sentence: what replaces the tensors inside :class:`PerSentence` (default: ``fn``)
    """
    if isinstance(state, Unmoved):
        return state
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, PerSentence):
        inner = per_sentence or fn
        return PerSentence(map_tensors(state.value, inner, inner))
    if isinstance(state, dict):
        return {k: map_tensors(v, fn, per_sentence) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(map_tensors(v, fn, per_sentence) for v in state)
    return state


def reorder_state(state: Any, index: torch.Tensor) -> Any:
    """Select rows ``index`` (B',) of every tensor in ``state`` (batch-first), recursively."""
    return map_tensors(state, lambda t: t.index_select(0, index))
