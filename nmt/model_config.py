"""Model settings without torch: each architecture's config dataclass and its named sizes (from the papers), and
what a model directory records of the model's data for translation (:class:`ModelMeta`).

The workflow resolves every model's options while Snakemake parses it, on a login node that need not have
torch, so this module imports nothing heavy; :mod:`nmt.models.seq2seq` pairs each architecture with its builder.
"""

import re
from dataclasses import dataclass, fields
from typing import Any, Literal

from nmt.config import from_dict
from nmt.errors import ConfigError


@dataclass
class RnnConfig:
    """Sizes and variants of the recurrent model; the defaults are the ``small`` size."""

    cell: Literal["gru", "lstm"] = "gru"
    emb_dim: int = 256
    hidden_size: int = 256  # per direction, encoder and decoder
    enc_layers: int = 1
    dec_layers: int = 1
    bidirectional: bool = True
    bidir_combine: Literal["concat", "sum"] = "concat"  # of the forward and backward encoder states
    dropout: float = 0.3  # on embeddings, encoder outputs, between stacked layers and on o_t
    attention: Literal["additive", "dot", "general"] = "additive"
    attention_dim: int = 256  # hidden size of additive attention (n' in Bahdanau, appendix A.2)
    attention_query: Literal["previous", "current"] = "previous"  # s_{t-1} (Bahdanau) or s_t (Luong)
    input_feeding: bool = False
    # Decoder start s_0: zeros, or tanh(W x) of the encoder's final state or mean output.
    init_state: Literal["zeros", "final", "mean"] = "final"
    # o_t: [s_t; c_t] (linear); tanh(W [s_t; c_t]) (deep, Luong eq. 5); maxout of [s_t; c_t; E y_{t-1}] (maxout).
    output_layer: Literal["linear", "deep", "maxout"] = "maxout"
    output_dim: int = 256  # R of the deep and maxout output layers (l in Bahdanau, appendix A.2)
    share_embeddings: bool = True  # one source/target embedding when the subword vocabulary is joint
    tie_output: bool = False  # output projection = target embedding; needs R == emb_dim

    @property
    def enc_size(self) -> int:
        """K, the size of one encoder output."""
        return 2 * self.hidden_size if self.bidirectional and self.bidir_combine == "concat" else self.hidden_size

    @property
    def out_size(self) -> int:
        """R, the size of o_t, the input of the output projection."""
        return self.hidden_size + self.enc_size if self.output_layer == "linear" else self.output_dim

    def check(self, where: str) -> None:
        sizes = ("emb_dim", "hidden_size", "enc_layers", "dec_layers", "attention_dim", "output_dim")
        for name in sizes:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name}: must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")
        if self.attention == "dot" and self.enc_size != self.hidden_size:
            raise ConfigError(
                f"{where}.attention: 'dot' needs encoder outputs of hidden_size {self.hidden_size}, got {self.enc_size}"
                " (use 'general', bidir_combine 'sum' or a uni-directional encoder)"
            )
        # We raise rather than add a projection: the papers never tie, and a silent extra layer would
        # change the model behind the user's back.
        if self.tie_output and self.out_size != self.emb_dim:
            raise ConfigError(
                f"{where}.tie_output: the output projection reads {self.out_size} features but emb_dim is"
                f" {self.emb_dim} (set output_dim to emb_dim with a deep or maxout output_layer)"
            )


# Named layouts; "rnnsearch" is RNNsearch-50 (Bahdanau et al. 2015, appendix A.2), "luong" the global-attention
# model of Luong et al. 2015 (section 4.1); "small"/"tiny" are our CPU sizes.
RNN_SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "emb_dim": 32,
        "hidden_size": 32,
        "attention_dim": 32,
        "output_dim": 32,
        "enc_layers": 1,
        "dec_layers": 1,
        "dropout": 0.1,
    },
    "small": {
        "cell": "gru",
        "emb_dim": 256,
        "hidden_size": 256,
        "attention_dim": 256,
        "output_dim": 256,
        "enc_layers": 1,
        "dec_layers": 1,
        "bidirectional": True,
        "attention": "additive",
        "output_layer": "maxout",
        "dropout": 0.3,
    },
    # Bi-GRU of 1000 units, embeddings 620, alignment model n' = 1000, maxout output l = 500; s_0 is a tanh
    # map of the backward encoder state at the first word (init "final"). The paper mentions no dropout.
    "rnnsearch": {
        "cell": "gru",
        "emb_dim": 620,
        "hidden_size": 1000,
        "enc_layers": 1,
        "dec_layers": 1,
        "bidirectional": True,
        "bidir_combine": "concat",
        "attention": "additive",
        "attention_dim": 1000,
        "attention_query": "previous",
        "input_feeding": False,
        "init_state": "final",
        "output_layer": "maxout",
        "output_dim": 500,
        "dropout": 0.0,
        "share_embeddings": False,
        "tie_output": False,
    },
    # 4-layer LSTMs of 1000 cells, embeddings 1000, dropout 0.2, global "general" attention, input feeding,
    # attentional vector tanh(W_c [c_t; h_t]) of 1000 units. The paper starts the decoder from the encoder's
    # last state (Sutskever et al. 2014); init "final" learns a tanh map of it instead. The paper also
    # reverses the source sentences, which this model does not.
    "luong": {
        "cell": "lstm",
        "emb_dim": 1000,
        "hidden_size": 1000,
        "enc_layers": 4,
        "dec_layers": 4,
        "bidirectional": False,
        "attention": "general",
        "attention_query": "current",
        "input_feeding": True,
        "init_state": "final",
        "output_layer": "deep",
        "output_dim": 1000,
        "dropout": 0.2,
        "share_embeddings": False,
        "tie_output": False,
    },
}


@dataclass
class ConvS2SConfig:
    """ConvS2S sizes (section 3; sizes of section 4.2 and 5.1).

    ``channels`` and ``kernel_size`` hold one value for every block, or one value per block; a
    per-block layout is shared by encoder and decoder, as in all of the paper's WMT models, and
    then needs ``enc_layers == dec_layers``. ``share_embeddings`` needs a joint subword
    vocabulary; ``tie_output`` needs ``out_emb_dim == emb_dim``.
    """

    emb_dim: int = 256
    enc_layers: int = 6
    dec_layers: int = 4
    channels: tuple[int, ...] = (256,)
    kernel_size: tuple[int, ...] = (3,)
    out_emb_dim: int = 256
    dropout: float = 0.2
    max_positions: int = 1024
    share_embeddings: bool = True
    tie_output: bool = True

    def check(self, where: str) -> None:
        for name in ("emb_dim", "enc_layers", "dec_layers", "out_emb_dim", "max_positions"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name}: must be > 0, got {getattr(self, name)}")
        for name in ("channels", "kernel_size"):
            values = getattr(self, name)
            if len(values) != 1 and not len(values) == self.enc_layers == self.dec_layers:
                raise ConfigError(
                    f"{where}.{name}: needs one value or one per layer ({self.enc_layers} encoder and "
                    f"{self.dec_layers} decoder layers), got {len(values)}"
                )
            if any(not isinstance(v, int) or v <= 0 for v in values):
                raise ConfigError(f"{where}.{name}: must be positive integers, got {values}")
        if any(k % 2 == 0 for k in self.kernel_size):
            raise ConfigError(f"{where}.kernel_size: must be odd to centre the encoder convolutions")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")
        if self.tie_output and self.out_emb_dim != self.emb_dim:
            raise ConfigError(f"{where}.tie_output: needs out_emb_dim ({self.out_emb_dim}) == emb_dim ({self.emb_dim})")


# Section 5.1: WMT'14 En-De has 10 blocks of 512, 3 of 768 (width 3) and 2 of 2048 that are linear maps
# (width 1). For En-Fr the paper says "15 layers" but lists 5 + 4 + 3 + 2 = 14 blocks, consistent with the
# "effective context size of only 25 words" it reports (12 blocks of width 3); we follow the list.
# Embeddings and the decoder output before the softmax are 512 (section 4.2). The paper gives no dropout
# rates: 0.2, and 0.1 for the large En-Fr corpus, are our choice (as in fairseq's example commands).
_EN_DE = {"channels": (512,) * 10 + (768,) * 3 + (2048,) * 2, "kernel_size": (3,) * 13 + (1,) * 2}
_EN_FR = {"channels": (512,) * 5 + (768,) * 4 + (1024,) * 3 + (2048, 4096), "kernel_size": (3,) * 12 + (1,) * 2}
_WMT = {"emb_dim": 512, "out_emb_dim": 512, "share_embeddings": False, "tie_output": False, "dropout": 0.2}

# "small" is our CPU size for Multi30k (its parameters: README.md, "What the default run does and costs"), "tiny" is
# for tests.
CONVS2S_SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "emb_dim": 32,
        "channels": (32,),
        "enc_layers": 2,
        "dec_layers": 2,
        "kernel_size": (3,),
        "out_emb_dim": 32,
        "dropout": 0.1,
    },
    "small": {
        "emb_dim": 256,
        "channels": (256,),
        "enc_layers": 6,
        "dec_layers": 4,
        "kernel_size": (3,),
        "out_emb_dim": 256,
        "dropout": 0.2,
    },
    "wmt16_en_ro": {**_WMT, "channels": (512,), "kernel_size": (3,), "enc_layers": 20, "dec_layers": 20},
    "wmt14_en_de": {**_WMT, **_EN_DE, "enc_layers": 15, "dec_layers": 15},
    "wmt14_en_fr": {**_WMT, **_EN_FR, "enc_layers": 14, "dec_layers": 14, "dropout": 0.1},
}


@dataclass
class TransformerConfig:
    """Transformer sizes; ``share_embeddings`` needs a joint subword vocabulary."""

    d_model: int = 256
    n_heads: int = 4
    ff_dim: int = 1024
    enc_layers: int = 3
    dec_layers: int = 3
    dropout: float = 0.1
    norm: Literal["pre", "post"] = "pre"
    share_embeddings: bool = True
    tie_output: bool = True
    max_positions: int = 1024

    def check(self, where: str) -> None:
        for name in ("d_model", "n_heads", "ff_dim", "enc_layers", "dec_layers", "max_positions"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{where}.{name}: must be > 0, got {getattr(self, name)}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{where}.dropout: must be in [0, 1), got {self.dropout}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"{where}.n_heads: d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.d_model % 2:
            raise ConfigError(f"{where}.d_model: must be even (sine and cosine positions), got {self.d_model}")


# Named layouts; "base" and "big" are table 3 of the paper, "small"/"tiny" are our CPU sizes.
TRANSFORMER_SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"d_model": 64, "n_heads": 2, "ff_dim": 128, "enc_layers": 1, "dec_layers": 1},
    "small": {"d_model": 256, "n_heads": 4, "ff_dim": 1024, "enc_layers": 3, "dec_layers": 3},
    "base": {
        "d_model": 512,
        "n_heads": 8,
        "ff_dim": 2048,
        "enc_layers": 6,
        "dec_layers": 6,
        "dropout": 0.1,
        "norm": "post",
    },
    "big": {
        "d_model": 1024,
        "n_heads": 16,
        "ff_dim": 4096,
        "enc_layers": 6,
        "dec_layers": 6,
        "dropout": 0.3,
        "norm": "post",
    },
}


# name -> (config dataclass, sizes); nmt.models.seq2seq.ARCHITECTURES holds the builders.
MODEL_CONFIGS = {
    "rnn": (RnnConfig, RNN_SIZES),
    "convs2s": (ConvS2SConfig, CONVS2S_SIZES),
    "transformer": (TransformerConfig, TRANSFORMER_SIZES),
}


def resolve_model_options(options: dict[str, Any], where: str, taken: tuple[str, ...] = ()) -> tuple[str, Any]:
    """Turn ``{"arch": ..., "size": ..., **overrides}`` into ``(arch, config dataclass)``.

    :param taken: keys of the entry that the caller has taken out (a config's ``training``), named among the known
        keys when another key is unknown
    """
    options = dict(options)
    arch = options.pop("arch", None)
    if arch not in MODEL_CONFIGS:
        raise ConfigError(f"{where}.arch: {arch!r} is not one of {', '.join(map(repr, MODEL_CONFIGS))}")
    config_cls, sizes = MODEL_CONFIGS[arch]
    known = ["arch", "size", *taken, *(field.name for field in fields(config_cls))]
    unknown = sorted(set(options) - set(known), key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}' (known keys of a {arch}: {', '.join(known)})")
    size = options.pop("size", None)
    if size is not None and size not in sizes:
        raise ConfigError(f"{where}.size: {size!r} is not a {arch} size ({', '.join(sizes)})")
    return arch, from_dict(config_cls, {**sizes.get(size, {}), **options}, where)


@dataclass
class ModelMeta:
    """What translating with a model needs to know of its training data, recorded in the model directory.

    ``src_lang`` and ``normalize_punctuation`` rebuild the normalizer that cleaning applied to the
    sources (:class:`nmt.data.normalize.Normalizer`); ``tagged_bt`` says whether synthetic training sources
    started with the back-translation tag (real inputs never do). A multilingual model's ``directions``
    (``SRC-TRG``) say which target-language tags its sources start with (:func:`nmt.vocab.target_tag`) and which
    source languages it normalizes; its ``src_lang`` (``trg_lang``) is empty when it has several.
    """

    src_lang: str
    trg_lang: str
    normalize_punctuation: bool = True
    tagged_bt: bool = False
    directions: list[str] | None = None

    def check(self, where: str) -> None:
        for direction in self.directions or []:
            if not re.fullmatch(r"[a-z]{2,3}-[a-z]{2,3}", direction):
                raise ConfigError(f"{where}.directions: {direction!r} is not a direction SRC-TRG such as 'en-de'")
