"""Greedy search and sampling in CTranslate2 (``runtime: ctranslate2`` of a decoding config).

Back-translation decodes millions of monolingual sentences with greedy search or sampling, and
CTranslate2 runs that search in C++. :func:`load_translator` exports a Transformer model directory
(:func:`nmt.export.export_model`) to a temporary directory and loads it; :func:`ct2_search` is a
:data:`nmt.translation.Search`, so the lines go through the same encoding, length cuts, sorting and
batching as with torch, and only the search differs.

Output limits: CTranslate2 takes one ``max_decoding_length`` per batch, ours is per sentence
(``a * S + b``). The batch gets the largest, and each output is cut to its own limit. Greedy search
and sampling choose each token from the prefix alone, so the cut output is the one that the
sentence's own limit gives: greedy output equals :func:`nmt.search.greedy_search`'s token for token
in float32 (``tests/test_ct2_search.py``). Sampling draws from CTranslate2's generator, seeded with
``config.seed`` (so not the samples of torch's generator).
"""

import tempfile
from collections.abc import Callable
from pathlib import Path

import sentencepiece as spm
import torch

from nmt.config import DecodeConfig
from nmt.data import EOS
from nmt.export import export_model, max_decoding_length


def load_translator(model_dir: str | Path, device: torch.device, threads: int):
    """A ``ctranslate2.Translator`` of ``model_dir``, exported to a temporary directory (float32 weights).

    :raises nmt.errors.ConfigError: when ctranslate2 is not installed or the model is not a Transformer
    """
    with tempfile.TemporaryDirectory(prefix="nmt-ct2-") as tmp:
        out = export_model(model_dir, Path(tmp) / "model")
        import ctranslate2  # export_model checked that it is installed

        # The translator reads the files now; the directory may go afterwards.
        return ctranslate2.Translator(str(out), device=device.type, intra_threads=threads)


def ct2_search(
    translator, src_sp: spm.SentencePieceProcessor, trg_sp: spm.SentencePieceProcessor, config: DecodeConfig
) -> Callable[[torch.Tensor, float, int], list[list[int]]]:
    """A search over padded source ids (B, S), with EOS, by ``translator``: output ids without EOS per sentence."""
    config.check("decoding")  # refuses method beam with runtime ctranslate2
    import ctranslate2

    topk = 1 if config.method == "greedy" else config.sampling_topk  # CTranslate2: 1 greedy, 0 whole vocabulary
    ctranslate2.set_random_seed(config.seed)

    def search(src: torch.Tensor, max_len_a: float, max_len_b: int) -> list[list[int]]:
        ids = [row[: row.index(EOS)] for row in src.tolist()]
        limits = [max_decoding_length(len(row), max_len_a, max_len_b) for row in ids]
        results = translator.translate_batch(
            [[src_sp.id_to_piece(i) for i in row] for row in ids],
            beam_size=1,
            sampling_topk=topk,
            max_decoding_length=max(limits),
            min_decoding_length=0,  # EOS may come first, as in ours
            max_batch_size=config.batch_size,
        )
        return [
            [trg_sp.piece_to_id(piece) for piece in result.hypotheses[0][:limit]]
            for result, limit in zip(results, limits, strict=True)
        ]

    return search
