"""CTranslate2, the inference engine that OpenNMT-py and fairseq users deploy with: the export of a trained
Transformer model directory (``python -m nmt export MODEL_DIR OUT``; the workflow's rule export_model, once per model
and weight type), and greedy search, sampling and beam search run in it, on such an export or on a model directory.

Export.

The export builds CTranslate2's ``TransformerSpec`` from our architecture config and fills it from our
state dict; CTranslate2's converters for OpenNMT-py and fairseq do the same for theirs. What differs
from CTranslate2's defaults is set explicitly: our sinusoidal table interleaves sin and cos (CTranslate2's
built-in one is [sin | cos] halves), so it is exported as position encodings; ``nn.LayerNorm`` uses
epsilon 1e-5; the source ends with EOS, which CTranslate2 appends (``add_source_eos``). ``spec.json`` keeps our
model spec beside CTranslate2's files, so that inputs are cut to the model's ``max_positions`` as with torch, and
the weight type, from which the compute type on a GPU follows (:func:`ct2_compute_type`:
float16, or int8_float16 for int8 weights; on the CPU the weights' own type).

Output length: for a source of S subwords plus EOS, our search ends a hypothesis at
``floor(max_len_a * (S + 1) + max_len_b)`` tokens including EOS (:func:`nmt.decoding.search.max_output_lengths`),
i.e. at most one token fewer without it; :func:`max_decoding_length` gives CTranslate2's
``max_decoding_length`` (which counts tokens without EOS) for the same limit.

Search. Back-translation decodes millions of monolingual sentences, and distillation's teacher the whole training
corpus; CTranslate2 runs their search in C++. :func:`load_ctranslate2` loads an export as it is, or exports a
Transformer model directory (:func:`export_model`) to a temporary directory and loads that; :func:`ct2_search` is a
:data:`nmt.decoding.translation.Search`, so the lines go through the same encoding, length cuts, sorting and
batching as with torch, and only the search differs. Decoding an export does not import torch (only the export
does), so a CTranslate2 decoding process starts sooner and holds less memory (benchmarks/README.md, "Measurements
behind the code").

Output limits: CTranslate2 takes one ``max_decoding_length`` per call, ours is per sentence (``a * S + b``).
Greedy search and sampling choose each token from the prefix alone, so a batch gets its largest limit and each
output is cut to its own: greedy output equals :func:`nmt.decoding.search.greedy_search`'s token for token in
float32. Beam search's limit decides where a search ends: a batch is searched at its largest limit, and a sentence
whose search may have run to its own limit again at that (:func:`_beam_batch`); with our
``length_normalization: ctranslate2`` (:func:`nmt.decoding.beam.beam_search_nbest`, whose rules
are CTranslate2's) its output equals ours token for token in float32, n-best lists and their scores too
(``tests/test_ctranslate2_search.py``). Sampling draws from CTranslate2's generator, seeded with ``config.seed``
(so not the samples of torch's generator).

Tokens: as in :mod:`nmt.decoding.search`, PAD and BOS are suppressed, UNK too when sampling
(``disable_unk``), and EOS cannot come first (``min_decoding_length`` 1; CTranslate2's lengths leave EOS out).
"""

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm

from nmt.atomic import atomic_path
from nmt.config import DecodeConfig
from nmt.data.subword import load_subword
from nmt.errors import ConfigError, DataError
from nmt.model_dir import EXPORT_FILE, META_FILE, MODEL_FILE, SRC_SPM, TRG_SPM, read_model_file
from nmt.vocab import BOS, EOS, PAD, UNK

# ctranslate2's weight types (its --quantization choices).
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which nmt.models.transformer uses
# Our model spec (architecture config and vocabulary sizes: model.pt's "spec") in an export.
SPEC_FILE = "spec.json"
# CTranslate2's compute type on CUDA by the decoding precision setting (nmt.device's bf16: auto, on, off), for float
# weights and for int8 weights; on the CPU it computes in the export's own type ("default": float32 or int8).
CUDA_COMPUTE_TYPES = {
    "auto": ("float16", "int8_float16"),
    "on": ("bfloat16", "int8_bfloat16"),
    "off": ("float32", "int8_float32"),
}


def max_decoding_length(n_src_tokens: int, max_len_a: float, max_len_b: int) -> int:
    """CTranslate2's ``max_decoding_length`` that matches our limit for one sentence.

    :param n_src_tokens: source subwords without EOS
    :return: the most output tokens without EOS that our search allows (its limit counts EOS)
    """
    return max(1, int((n_src_tokens + 1) * max_len_a + max_len_b)) - 1


def export_model(
    model_dir: str | Path, out_dir: str | Path, quantization: str | None = None, force: bool = False
) -> Path:
    """Convert the Transformer in ``model_dir`` (model.pt, src.model, trg.model) into ``out_dir``.

    The model is written to a temporary folder beside ``out_dir`` and renamed when complete.

    :param quantization: CTranslate2 weight type (``int8``, ``float16``, ...); None keeps float32
    :param force: replace an existing ``out_dir``
    :return: ``out_dir``
    :raises ConfigError: for another architecture or quantization, or when ctranslate2 is not installed
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(f"--quantization: {quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists() and not force:
        raise DataError(f"{out_dir}: already exists (use --force to replace it)")
    ckpt = read_model_file(model_dir)
    spec = ckpt["spec"]
    if spec["arch"] != "transformer":
        raise ConfigError(
            f"{model_dir / MODEL_FILE}: a {spec['arch']} model cannot be exported to CTranslate2, "
            "which has a model specification for the Transformer only"
        )
    try:
        import ctranslate2  # noqa: F401  (an optional dependency: pip install 'nmt[export]')
    except ImportError:
        raise ConfigError("export needs the ctranslate2 package: pip install 'ctranslate2==4.8.5'") from None
    ct2_spec = get_ctranslate2_spec(spec["config"], ckpt["model"])
    src_sp, trg_sp = load_subword(model_dir / SRC_SPM), load_subword(model_dir / TRG_SPM)
    ct2_spec.register_source_vocabulary([src_sp.id_to_piece(i) for i in range(src_sp.get_piece_size())])
    ct2_spec.register_target_vocabulary([trg_sp.id_to_piece(i) for i in range(trg_sp.get_piece_size())])
    # Our ids are fixed (nmt.data); CTranslate2 finds the special tokens by their pieces.
    ct2_spec.config.unk_token = trg_sp.id_to_piece(UNK)
    ct2_spec.config.bos_token = ct2_spec.config.decoder_start_token = trg_sp.id_to_piece(BOS)
    ct2_spec.config.eos_token = trg_sp.id_to_piece(EOS)
    ct2_spec.config.add_source_eos = True
    ct2_spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    ct2_spec.validate()
    ct2_spec.optimize(quantization=quantization)
    with atomic_path(out_dir) as tmp:  # a folder that replaces an existing out_dir
        tmp.mkdir()
        ct2_spec.save(str(tmp))
        record = {**spec, "quantization": quantization or "float32"}  # its compute type on a GPU: ct2_compute_type
        (tmp / SPEC_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        for name in (SRC_SPM, TRG_SPM, META_FILE):  # so that the export is usable on its own
            if (model_dir / name).is_file():
                shutil.copyfile(model_dir / name, tmp / name)
    return out_dir


def get_ctranslate2_spec(config: dict[str, Any], state: dict[str, Any]):
    """A ``ctranslate2.specs.TransformerSpec`` of our Transformer ``config`` with the weights of ``state``.

    :param config: ``Seq2Seq.spec["config"]`` (the fields of :class:`nmt.models.transformer.TransformerConfig`)
    :param state: the model's state dict
    """
    from ctranslate2.specs import common_spec, transformer_spec

    from nmt.models.transformer import sinusoid_table

    weights = {name: tensor.float().numpy() for name, tensor in state.items()}
    spec = transformer_spec.TransformerSpec.from_config(
        (config["enc_layers"], config["dec_layers"]),
        config["n_heads"],
        pre_norm=config["norm"] == "pre",
        activation=common_spec.Activation.RELU,
    )
    positions = sinusoid_table(config["max_positions"], config["d_model"]).numpy()
    for side, ct2_side in (("encoder", spec.encoder), ("decoder", spec.decoder)):
        embeddings = ct2_side.embeddings[0] if isinstance(ct2_side.embeddings, list) else ct2_side.embeddings
        embeddings.weight = weights[f"{side}.embedding.tokens.weight"]
        ct2_side.scale_embeddings = True  # times sqrt(D), as TransformerEmbedding does
        ct2_side.position_encodings.encodings = positions
        if config["norm"] == "pre":
            _set_layer_norm(ct2_side.layer_norm, weights, f"{side}.final_norm")
    for i, layer in enumerate(spec.encoder.layer):
        prefix = f"encoder.layers.{i}"
        _set_attention(layer.self_attention, weights, f"{prefix}.self_attn", ["qkv"])
        _set_layer_norm(layer.self_attention.layer_norm, weights, f"{prefix}.attn_sub.norm")
        _set_ffn(layer.ffn, weights, prefix)
    for i, layer in enumerate(spec.decoder.layer):
        prefix = f"decoder.layers.{i}"
        _set_attention(layer.self_attention, weights, f"{prefix}.self_attn", ["qkv"])
        _set_layer_norm(layer.self_attention.layer_norm, weights, f"{prefix}.self_sub.norm")
        _set_attention(layer.attention, weights, f"{prefix}.cross_attn", ["q", "kv"])
        _set_layer_norm(layer.attention.layer_norm, weights, f"{prefix}.cross_sub.norm")
        _set_ffn(layer.ffn, weights, prefix)
    spec.decoder.projection.weight = weights["decoder.output.weight"]  # the embedding itself when tied
    return spec


def _set_linear(linear, weights: dict[str, np.ndarray], name: str) -> None:
    linear.weight = weights[f"{name}.weight"]
    if f"{name}.bias" in weights:
        linear.bias = weights[f"{name}.bias"]


def _set_layer_norm(norm, weights: dict[str, np.ndarray], name: str) -> None:
    norm.gamma, norm.beta = weights[f"{name}.weight"], weights[f"{name}.bias"]


def _set_attention(attention, weights: dict[str, np.ndarray], name: str, inputs: list[str]) -> None:
    """Our fused projections have CTranslate2's layout: self-attention [q; k; v], cross-attention q and [k; v]."""
    for linear, part in zip(attention.linear, [*inputs, "out"], strict=True):
        _set_linear(linear, weights, f"{name}.{part}")


def _set_ffn(ffn, weights: dict[str, np.ndarray], prefix: str) -> None:
    _set_layer_norm(ffn.layer_norm, weights, f"{prefix}.ff_sub.norm")
    _set_linear(ffn.linear_0, weights, f"{prefix}.ff.0")  # FeedForward: Linear, ReLU, Dropout, Linear
    _set_linear(ffn.linear_1, weights, f"{prefix}.ff.3")


@dataclass
class CTranslate2Model:
    """A CTranslate2 translator where translation takes a model: ``spec`` (our model spec, or ``{"config": {}}``
    for an export made without one) gives its position limit, and it is never in training mode."""

    translator: Any
    spec: dict[str, Any]
    training: bool = False

    def train(self, mode: bool = True) -> "CTranslate2Model":
        return self

    def eval(self) -> "CTranslate2Model":
        return self


def ct2_device(name: str = "auto") -> str:
    """CTranslate2's device for ``name``: ``auto`` picks CUDA when CTranslate2 sees a GPU, else CPU."""
    import ctranslate2

    if name == "auto":
        return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    if name == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        raise DataError("device 'cuda' was requested but CTranslate2 sees no CUDA device")
    return name


def ct2_compute_type(device: str, weights: str | None, bf16: str = "auto") -> str:
    """CTranslate2's ``compute_type`` for an export of ``weights`` (its quantization; None: not recorded) on
    ``device``: on CUDA half precision, as torch decodes there (float16, int8_float16; bfloat16 with ``bf16`` on,
    float32 with off); on the CPU, and for weights not recorded, the export's own type (``default``)."""
    if device != "cuda" or weights is None:
        return "default"
    floats, int8 = CUDA_COMPUTE_TYPES[bf16]
    return int8 if weights.startswith("int8") else floats


def load_ctranslate2(
    model_dir: str | Path, device: str, threads: int, quantization: str = "float32", bf16: str = "auto"
) -> tuple[CTranslate2Model, spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    """The CTranslate2 model and the subword models of an export (``nmt export``, the workflow's rule export_model),
    loaded as they are, or of a model directory, exported to a temporary directory at every start.

    :param device: ``cpu`` or ``cuda``
    :param threads: CTranslate2's ``intra_threads``
    :param quantization: the weight type of the export made at start-up (an export keeps its own)
    :param bf16: the decoding precision setting, which picks the compute type on CUDA (:func:`ct2_compute_type`)

    :raises nmt.errors.ConfigError: when ctranslate2 is not installed or the model is not a Transformer
    :raises nmt.errors.DataError: naming the file, when a subword model is missing, corrupt or of another model
    """
    model_dir = Path(model_dir)
    if (model_dir / EXPORT_FILE).is_file():
        return _load_export(model_dir, device, threads, bf16)
    with tempfile.TemporaryDirectory(prefix="nmt-ct2-") as tmp:
        # The translator reads the files now; the directory may go afterwards.
        return _load_export(export_model(model_dir, Path(tmp) / "model", quantization), device, threads, bf16)


def _load_export(
    export_dir: Path, device: str, threads: int, bf16: str
) -> tuple[CTranslate2Model, spm.SentencePieceProcessor, spm.SentencePieceProcessor]:
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError(
            "runtime ctranslate2 needs the ctranslate2 package: pip install 'ctranslate2==4.8.5'"
        ) from None
    spec_path = export_dir / SPEC_FILE
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8")) if spec_path.is_file() else {"config": {}}
        if not isinstance(spec.get("config"), dict):
            raise ValueError("no 'config' mapping")
    except (ValueError, AttributeError) as e:
        raise DataError(f"{spec_path}: not the model spec an export writes ({e})") from None
    src_sp, trg_sp = load_subword(export_dir / SRC_SPM), load_subword(export_dir / TRG_SPM)
    for name, sp, key in ((SRC_SPM, src_sp, "src_vocab"), (TRG_SPM, trg_sp, "trg_vocab")):
        if key in spec and sp.get_piece_size() != spec[key]:
            raise DataError(
                f"{export_dir / name}: {sp.get_piece_size()} pieces, but the model in {export_dir} has "
                f"{spec[key]}: the subword model belongs to another model"
            )
    try:
        compute_type = ct2_compute_type(device, spec.get("quantization"), bf16)
        translator = ctranslate2.Translator(
            str(export_dir), device=device, compute_type=compute_type, intra_threads=threads
        )
    except (RuntimeError, ValueError) as e:
        raise DataError(f"{export_dir}: not a CTranslate2 model ({' '.join(str(e).split())})") from None
    return CTranslate2Model(translator, spec), src_sp, trg_sp


def ct2_search(
    translator,
    src_sp: spm.SentencePieceProcessor,
    trg_sp: spm.SentencePieceProcessor,
    config: DecodeConfig,
    nbest: int | None = None,
) -> Callable[[list], Iterator[list]]:
    """A :data:`nmt.decoding.translation.Search` by ``translator``: over batches of source ids, each ending with EOS
    (:class:`~nmt.decoding.translation.SourceBatch`), output ids without EOS per sentence, or with ``nbest`` (beam
    search) its n-best list of ``(ids, score, logprob)``, as :class:`nmt.decoding.beam.Hypothesis`. One batch at a
    time: ``translator`` spreads each over its ``intra_threads``."""
    config.check("decoding")  # refuses GNMT's beam search with runtime ctranslate2
    import ctranslate2

    ctranslate2.set_random_seed(config.seed)
    options = {
        "suppress_sequences": [[trg_sp.id_to_piece(PAD)], [trg_sp.id_to_piece(BOS)]],  # search.NEVER_GENERATED
        "max_batch_size": config.batch_size,
    }
    if config.method == "beam":
        options |= {"beam_size": config.beam_size, "length_penalty": config.length_penalty}
        search_batch = partial(_beam_batch, translator, src_sp, trg_sp, options, nbest)
    else:  # CTranslate2's sampling_topk: 1 is greedy search, 0 the whole vocabulary
        topk = 1 if config.method == "greedy" else config.sampling_topk
        options |= {"beam_size": 1, "sampling_topk": topk, "disable_unk": config.method == "sample"}
        search_batch = partial(_one_path_batch, translator, src_sp, trg_sp, options)
    return lambda batches: map(search_batch, batches)


def _one_path_batch(translator, src_sp, trg_sp, options: dict[str, Any], batch) -> list[list[int]]:
    """Greedy search or sampling of one batch: the largest limit of the batch, each output cut to its own."""
    ids = [row[:-1] for row in batch.src]  # without EOS, which CTranslate2 appends
    limits = [max_decoding_length(len(row), batch.max_len_a, batch.max_len_b) for row in ids]
    results = translator.translate_batch(
        [[src_sp.id_to_piece(i) for i in row] for row in ids],
        max_decoding_length=max(limits),
        min_decoding_length=min(1, max(limits)),  # EOS not first, as in ours (the sources are not empty)
        **options,
    )
    return [
        [trg_sp.piece_to_id(piece) for piece in result.hypotheses[0][:limit]]
        for result, limit in zip(results, limits, strict=True)
    ]


def _beam_batch(translator, src_sp, trg_sp, options: dict[str, Any], nbest: int | None, batch) -> list:
    """Beam search of one batch, each sentence within its own limit, as
    :func:`nmt.decoding.beam.beam_search_nbest` with ``normalization="ctranslate2"`` searches it.

    CTranslate2 takes one limit per call, and the limit decides where a search ends. With alpha != 0 it stops a
    sentence once K hypotheses have finished, so the batch is searched at its largest limit, keeping the K best: a
    sentence whose K all end before the step before its own limit (fewer than ``limit - 1`` tokens) had its K by
    then, and that search is its own; the others are searched again, the sentences of each limit in a call. With
    alpha 0 a sentence stops once the best candidate of a step has ended, which no output shows: the sentences of
    each limit are searched together from the start.

    :return: per sentence its best output ids, or with ``nbest`` its n-best list of ``(ids, score, logprob)``
    """
    ids = [row[:-1] for row in batch.src]  # without EOS, which CTranslate2 appends
    limits = [max(1, max_decoding_length(len(row), batch.max_len_a, batch.max_len_b)) for row in ids]
    found: list = [None] * len(ids)
    todo = list(range(len(ids)))
    if options["length_penalty"] != 0:
        hyps = _ct2_beam(translator, src_sp, trg_sp, options, [ids[i] for i in todo], max(limits), options["beam_size"])
        for i, kept in zip(todo, hyps, strict=True):
            if limits[i] == max(limits) or all(len(h) <= limits[i] - 2 for h, _ in kept):
                found[i] = kept[: nbest or 1]
        todo = [i for i in todo if found[i] is None]
    for limit in sorted({limits[i] for i in todo}):
        group = [i for i in todo if limits[i] == limit]
        hyps = _ct2_beam(translator, src_sp, trg_sp, options, [ids[i] for i in group], limit, nbest or 1)
        for i, kept in zip(group, hyps, strict=True):
            found[i] = kept
    if nbest is None:
        return [kept[0][0] for kept in found]
    # the score is the log-probability / (positions ** alpha), EOS counted where the hypothesis has it
    alpha = options["length_penalty"]
    return [
        [(h, score, score * min(len(h) + 1, limit) ** alpha) for h, score in kept]
        for kept, limit in zip(found, limits, strict=True)
    ]


def _ct2_beam(
    translator, src_sp, trg_sp, options: dict[str, Any], ids: list[list[int]], limit: int, n: int
) -> list[list[tuple[list[int], float]]]:
    """CTranslate2's beam search of the sources ``ids`` (without EOS) within ``limit`` output tokens (without EOS):
    its ``n`` best ``(ids, score)`` per sentence, best first."""
    results = translator.translate_batch(
        [[src_sp.id_to_piece(i) for i in row] for row in ids],
        max_decoding_length=limit,
        min_decoding_length=1,
        num_hypotheses=n,
        return_scores=True,
        **options,
    )
    return [
        [
            ([trg_sp.piece_to_id(piece) for piece in hyp], score)
            for hyp, score in zip(r.hypotheses, r.scores, strict=True)
        ]
        for r in results
    ]
