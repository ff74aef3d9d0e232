"""Configuration dataclasses, one per concern, built from plain dicts with loud errors on unknown keys."""

import dataclasses
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin

from nmt.errors import ConfigError

C = TypeVar("C")


def from_dict(cls: type[C], data: dict[str, Any] | None, where: str) -> C:
    """Build the dataclass ``cls`` from ``data``, checking keys and value types.

    :param cls: a dataclass type
    :param data: the values; missing keys take the dataclass defaults
    :param where: the config path shown in errors, e.g. ``"train"``
    :return: the dataclass instance
    :raises ConfigError: on an unknown key or a value of the wrong type/choice
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    data = dict(data)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}' (known keys: {', '.join(fields)})")
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        data[name] = _check_value(value, hints[name], f"{where}.{name}")
        if name == "seed" or name.endswith("_seed"):  # every section's seeds, by one rule
            check_seed(f"{where}.{name}", data[name])
    obj = cls(**data)
    check = getattr(obj, "check", None)
    if check is not None:
        check(where)
    return obj


# A number as YAML 1.1 (PyYAML, Snakemake) may leave it a string: ``1e-3`` has no dot, so it is not a float there.
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
# The choices of a switch such as ``bf16`` that YAML 1.1 reads as booleans (``on``, ``off``, ``yes``, ``no``).
SWITCH = {True: "on", False: "off"}


def read_number(value: Any, integer: bool = False) -> Any:
    """``value`` as a number if it is a string that writes one (``"1e-3"``, ``"1e4"`` where an ``integer`` is
    wanted and the number is whole); anything else as it is, for the type check to name."""
    if not isinstance(value, str) or not NUMBER.fullmatch(value.strip()):
        return value
    number = float(value)
    if not integer:
        return number
    return int(number) if number.is_integer() else value


def read_switch(value: Any, choices: Iterable[Any]) -> Any:
    """``"on"``/``"off"`` for a boolean where ``choices`` hold them (YAML 1.1 reads ``bf16: on`` as True)."""
    choices = list(choices)
    if isinstance(value, bool) and SWITCH[value] in choices and value not in choices:
        return SWITCH[value]
    return value


def _check_value(value: Any, hint: Any, key: str) -> Any:
    """Return ``value`` (ints widened to float where a float is wanted, YAML 1.1's booleans and numeric
    strings read as :func:`read_switch` and :func:`read_number` do) or raise naming ``key``."""
    origin = get_origin(hint)
    if origin is Literal:
        value = read_switch(value, get_args(hint))
        if value not in get_args(hint):
            choices = ", ".join(repr(c) for c in get_args(hint))
            raise ConfigError(f"{key}: {value!r} is not one of {choices}")
        return value
    if origin in (typing.Union, types.UnionType):
        for option in get_args(hint):
            if option is type(None) and value is None:
                return None
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _check_value(value, inner[0], key)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        value_hint = get_args(hint)[1]
        return {str(name): _check_value(item, value_hint, f"{key}.{name}") for name, item in value.items()}
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return list(value) if origin is list else tuple(value)
    if hint in (int, float):
        value = read_number(value, integer=hint is int)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool):
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise ConfigError(f"{key}: expected {hint.__name__}, got {value!r}")
    return value


def _positive(where: str, **values: float) -> None:
    for name, value in values.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{where}.{name}: must be > 0, got {value!r}")


# The largest seed: sentencepiece and CTranslate2 take an unsigned 32-bit seed, numpy a non-negative one, and a
# run adds small offsets to it (a process's rank, a back-translation part's number).
MAX_SEED = 2**31 - 1


def check_seed(where: str, seed: int) -> None:
    """Raise ConfigError naming ``where`` unless ``seed`` is in [0, :data:`MAX_SEED`]."""
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{where}: a seed must be from 0 to {MAX_SEED}, got {seed!r}")


@dataclass
class CorpusConfig:
    """An entry of the ``corpora`` section: where a corpus comes from (:mod:`nmt.data.importers`), its own cleaning
    keys and weight; every key is described in workflow/schemas/config.schema.yaml."""

    importer: Literal["url", "local", "opus", "sacrebleu"] = "url"
    url: str | None = None
    path: str | None = None
    sha256: dict = dataclasses.field(default_factory=dict)
    member: str | None = None
    tsv_columns: dict = dataclasses.field(default_factory=dict)
    corpus: str | None = None
    version: str | None = None
    pair: str | None = None
    test_set: str | None = None
    langpair: str | None = None
    cleaning: dict = dataclasses.field(default_factory=dict)
    weight: float = 1.0
    tokenized_ref: dict = dataclasses.field(default_factory=dict)

    REQUIRED = {
        "url": ("url",),
        "local": ("path",),
        "opus": ("corpus", "version", "pair"),
        "sacrebleu": ("test_set", "langpair"),
    }

    def check(self, where: str) -> None:
        for key in self.REQUIRED[self.importer]:
            if getattr(self, key) is None:
                raise ConfigError(f"{where}: importer '{self.importer}' needs the key '{key}'")
        location = self.url if self.importer == "url" else self.path
        if location is not None and "{lang}" not in location and not (self.member or self.tsv_columns):
            raise ConfigError(f"{where}: '{location}' needs a {{lang}} placeholder (or member, or tsv_columns)")
        if self.member is not None and self.tsv_columns:
            raise ConfigError(f"{where}: member and tsv_columns exclude each other")
        columns = list((self.tsv_columns or {}).values())
        twice = next((column for column in columns if columns.count(column) > 1), None)
        if twice is not None:
            raise ConfigError(f"{where}.tsv_columns: two languages read column {twice}; each needs its own")
        _positive(where, weight=self.weight)
        self._check_tokenized_ref(f"{where}.tokenized_ref")
        known = [f.name for f in dataclasses.fields(CleanConfig) if f.name != "normalize_punctuation"]
        for key in self.cleaning:
            if key == "normalize_punctuation":
                raise ConfigError(
                    f"{where}.cleaning.normalize_punctuation: set it in the cleaning section only (a model normalizes "
                    "its input as all its training sources were normalized)"
                )
            if key not in known:
                raise ConfigError(f"{where}.cleaning: unknown key '{key}' (known keys: {', '.join(known)})")

    def _check_tokenized_ref(self, where: str) -> None:
        if not self.tokenized_ref:
            return
        unknown = sorted(set(self.tokenized_ref) - {"url", "sha256"})
        if unknown:
            raise ConfigError(f"{where}: unknown key '{unknown[0]}' (known keys: url, sha256)")
        url = self.tokenized_ref.get("url")
        if not isinstance(url, str) or "{lang}" not in url:
            raise ConfigError(
                f"{where}.url: expected the file of each language with a {{lang}} placeholder, got {url!r}"
            )
        if not isinstance(self.tokenized_ref.get("sha256", {}), dict):
            raise ConfigError(f"{where}.sha256: expected a mapping of language code to sum")

    def import_settings(self) -> dict[str, Any]:
        """What fetching the corpus depends on: every key but ``cleaning``, ``weight`` and ``tokenized_ref`` (fetched
        by a rule of its own), as a plain dict."""
        ignored = ("cleaning", "weight", "tokenized_ref")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ignored}

    @property
    def location(self) -> str | None:
        """The URL or path of the url/local importers."""
        return self.url if self.importer == "url" else self.path

    def source(self, lang: str) -> str:
        """The user's file of one language as configured (URL or path, archive member, TSV column), for messages."""
        if self.importer == "opus":
            return f"OPUS {self.corpus} {self.version} {self.pair} ({lang})"
        if self.importer == "sacrebleu":
            return f"sacrebleu {self.test_set} {self.langpair} ({lang})"
        location = self.location.replace("{lang}", lang)
        if self.member is not None:
            return f"{location}, member {self.member.replace('{lang}', lang)}"
        if self.tsv_columns:
            return f"{location}, column {self.tsv_columns.get(lang)}"
        return location

    def provides(self, lang: str) -> bool:
        """Whether the corpus can have a side in ``lang``: a TSV file's columns, an OPUS pair or sacreBLEU language
        pair, or a file name (URL, path or archive member) with ``{lang}`` (whether that file exists, its download
        finds out). A file named without ``{lang}`` holds one language, which the config does not name."""
        if self.tsv_columns:
            return lang in self.tsv_columns
        if self.importer in ("opus", "sacrebleu"):
            return lang in (self.pair if self.importer == "opus" else self.langpair).split("-")
        return "{lang}" in f"{self.location} {self.member or ''}"

    @property
    def archived(self) -> bool:
        """Whether one fetched file (archive or TSV) serves every language, so it is fetched once."""
        return self.importer == "opus" or self.member is not None or bool(self.tsv_columns)


@dataclass
class CleanConfig:
    """The ``cleaning`` section: filters of the training data (:func:`nmt.data.cleaning.clean_corpus`); every key is
    described in workflow/schemas/config.schema.yaml."""

    normalize_punctuation: bool = True
    max_invalid_utf8: float = 0.1
    min_length: int = 1
    max_length: int = 100
    max_token_chars: int | None = 100
    max_ratio: float = 3.0
    drop_copies: bool = True
    min_alpha: float = 0.5
    langid: bool = True
    langid_threshold: float = 0.9
    decontaminate: bool = True
    dedup: bool = True
    max_pairs: int | None = None
    shuffle: bool = False
    seed: int = 1

    def updated(self, overrides: dict[str, Any], where: str) -> "CleanConfig":
        """These settings with the keys of ``overrides`` replaced (a corpus's own ``cleaning`` keys), checked.

        :param where: the config path of ``overrides``, named in errors, e.g. ``corpora.europarl.cleaning``
        """
        return from_dict(CleanConfig, {**dataclasses.asdict(self), **overrides}, where)

    def check(self, where: str) -> None:
        _positive(
            where,
            min_length=self.min_length,
            max_length=self.max_length,
            max_token_chars=self.max_token_chars,
            max_ratio=self.max_ratio,
            max_pairs=self.max_pairs,
        )
        for name in ("max_invalid_utf8", "min_alpha", "langid_threshold"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{where}.{name}: must be in [0, 1], got {getattr(self, name)}")


@dataclass
class SubwordConfig:
    """The ``subword`` section: the sentencepiece model (Kudo and Richardson 2018); keys described in the schema."""

    model_type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: int = 8000
    joint: bool = True
    character_coverage: float = 1.0
    input_sentence_size: int = 2_000_000
    seed: int = 1

    def check(self, where: str) -> None:
        _positive(where, vocab_size=self.vocab_size, input_sentence_size=self.input_sentence_size)
        if not 0 < self.character_coverage <= 1:
            raise ConfigError(f"{where}.character_coverage: must be in (0, 1], got {self.character_coverage}")


@dataclass
class TrainConfig:
    """The ``training`` section (and ``nmt train --training``): optimisation, batching, validation and checkpointing
    of one training run; every key is described in workflow/schemas/config.schema.yaml."""

    seed: int = 1
    batch_tokens: int = 4096
    accum_steps: int = 1
    max_steps: int = 10000
    max_minutes: float | None = None
    max_epochs: int = 100
    max_length: int = 128
    optimizer: Literal["adam", "nesterov"] = "adam"
    lr: float = 7e-4
    lr_schedule: Literal["inverse_sqrt", "anneal_on_plateau", "linear", "cosine"] = "inverse_sqrt"
    warmup_steps: int = 1000
    anneal_factor: float = 0.1
    min_lr: float = 1e-4
    momentum: float = 0.99
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    log_every: int = 100
    valid_every: int = 500
    valid_metric: Literal["bleu", "chrf", "loss"] = "bleu"
    valid_beam_size: int = 1
    trg_lang: str = ""
    patience: int = 10
    checkpoint_every: int = 500
    average_last: int | None = None
    device: Literal["auto", "cpu", "cuda"] = "auto"
    bf16: Literal["auto", "on", "off"] = "auto"
    threads: int = 0
    init_from: str | None = None
    tensorboard: bool = False
    corpus_weights: dict[str, float] | None = None
    mix: dict[str, float] | None = None
    temperature: float | None = None
    stages: list[dict] | None = None

    # Keys a stage cannot set: stages do not nest, one seed runs through them all, and a stage starts from the
    # weights of the stage before it (the first from the enclosing init_from).
    NOT_IN_STAGES = ("stages", "seed", "init_from")

    def on_threads(self, threads: int) -> "TrainConfig":
        """This config with ``threads: 0`` (the job's) resolved to the ``threads`` of the job that trains."""
        return dataclasses.replace(self, threads=self.threads or threads)

    def check(self, where: str) -> None:
        _positive(
            where,
            batch_tokens=self.batch_tokens,
            accum_steps=self.accum_steps,
            max_steps=self.max_steps,
            max_epochs=self.max_epochs,
            max_length=self.max_length,
            lr=self.lr,
            log_every=self.log_every,
            valid_every=self.valid_every,
            valid_beam_size=self.valid_beam_size,
            patience=self.patience,
            checkpoint_every=self.checkpoint_every,
            min_lr=self.min_lr,
            average_last=self.average_last,
            max_minutes=self.max_minutes,
            temperature=self.temperature,
        )
        if not 0 < self.anneal_factor < 1:
            raise ConfigError(f"{where}.anneal_factor: must be in (0, 1), got {self.anneal_factor}")
        if self.lr_schedule == "anneal_on_plateau" and self.min_lr >= self.lr:
            raise ConfigError(f"{where}.min_lr: must be below lr ({self.lr}) to train at all, got {self.min_lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"{where}.momentum: must be in [0, 1), got {self.momentum}")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"{where}.label_smoothing: must be in [0, 1), got {self.label_smoothing}")
        if self.warmup_steps < 0:
            raise ConfigError(f"{where}.warmup_steps: must be >= 0, got {self.warmup_steps}")
        for key in ("corpus_weights", "mix"):
            for name, value in (getattr(self, key) or {}).items():
                if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                    raise ConfigError(f"{where}.{key}.{name}: must be a number > 0, got {value!r}")
        if self.mix is not None and self.corpus_weights is not None:
            raise ConfigError(
                f"{where}.mix: not with corpus_weights (a mix fixes each corpus's share of every batch; weights "
                "draw corpora per epoch)"
            )
        if self.temperature is not None and (self.mix is not None or self.corpus_weights is not None):
            raise ConfigError(f"{where}.temperature: not with corpus_weights or mix (it sets the corpus weights)")
        if self.mix is not None and not self.mix:
            raise ConfigError(f"{where}.mix: names no corpus; leave it out to draw every corpus")
        self.stage_configs(where)
        if not re.fullmatch(r"([a-z]{2,3})?", self.trg_lang):
            raise ConfigError(f"{where}.trg_lang: {self.trg_lang!r} is not a language code such as 'de' or 'zh'")

    def stage_configs(self, where: str = "training") -> list["TrainConfig"]:
        """The settings of each stage of a curriculum: the keys of ``stages[i]`` over these (``stages`` left out);
        ``[self]`` without stages.

        :param where: the config path of this section, named in errors (``training.stages[1].lr``)
        :raises ConfigError: a stage that is not a mapping, sets a key of :attr:`NOT_IN_STAGES`, an unknown key
            or a bad value
        """
        if self.stages is None:
            return [self]
        if not self.stages:
            raise ConfigError(f"{where}.stages: an empty list; leave it out to train in one stage")
        enclosing = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "stages"}
        configs = []
        for i, stage in enumerate(self.stages):
            at = f"{where}.stages[{i}]"
            if not isinstance(stage, dict):
                raise ConfigError(f"{at}: expected a mapping of training keys, got {stage!r}")
            for key in self.NOT_IN_STAGES:
                if key in stage:
                    raise ConfigError(
                        f"{at}.{key}: not a key of a stage (stages do not nest, share one seed, and each starts "
                        "from the weights of the stage before; set init_from and seed beside stages)"
                    )
            configs.append(from_dict(TrainConfig, {**enclosing, **stage}, at))
        return configs


# Greedy search's workers on the CPU by default, at most (nmt.decoding.translation.torch_search): each holds a
# batch's search in memory, so this bounds memory on many-core machines; measured only up to 2 cores
# (benchmarks/README.md, "What made it faster").
AUTO_WORKERS = 4


@dataclass
class DecodeConfig:
    """The ``decoding`` section (and a variant's ``generation``): search settings; output length is at most
    ``max_len_a * S + max_len_b`` subwords. Every key is described in workflow/schemas/config.schema.yaml."""

    method: Literal["beam", "greedy", "sample"] = "beam"
    beam_size: int = 5
    length_penalty: float = 1.0
    sampling_topk: int = 0
    seed: int = 1
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 64
    runtime: Literal["torch", "ctranslate2", "auto"] = "torch"
    eos_at_limit: Literal["charged", "free"] = "charged"
    length_normalization: Literal["gnmt", "ctranslate2"] = "gnmt"
    quantization: Literal["float32", "int8"] = "float32"

    def check(self, where: str) -> None:
        _positive(where, beam_size=self.beam_size, batch_size=self.batch_size)
        if self.runtime == "ctranslate2" and self.method == "beam" and self.length_normalization == "gnmt":
            raise ConfigError(
                f"{where}.runtime: ctranslate2 runs beam search with length_normalization ctranslate2, not gnmt (its "
                "beam search divides by length ** alpha): set that, or runtime auto (which runs gnmt in torch)"
            )
        if self.length_normalization == "ctranslate2" and self.eos_at_limit == "free":
            raise ConfigError(f"{where}.eos_at_limit: free is gnmt's; length_normalization ctranslate2 has its own")
        if self.runtime == "torch" and self.quantization != "float32":
            raise ConfigError(f"{where}.quantization: {self.quantization} weights are CTranslate2's (runtime auto)")
        if self.length_penalty < 0:
            raise ConfigError(f"{where}.length_penalty: must be >= 0, got {self.length_penalty}")
        if self.sampling_topk < 0:
            raise ConfigError(f"{where}.sampling_topk: must be >= 0, got {self.sampling_topk}")

    def describe(self) -> str:
        """Short name of the search, e.g. ``beam5``, ``greedy``, ``sample`` or ``sample-top10``."""
        if self.method == "beam":
            return f"beam{self.beam_size}"
        if self.method == "sample" and self.sampling_topk:
            return f"sample-top{self.sampling_topk}"
        return self.method


@dataclass
class SyntheticConfig:
    """A back-translation variant's (or the distillation ``filters``') filters of the synthetic pairs and data mix;
    every key is described in workflow/schemas/config.schema.yaml."""

    tagged: bool = False
    synthetic_ratio: float | None = None
    upsample_real: int = 1
    max_ratio: float = 3.0
    repeat_ngram: int = 3
    max_repeats: int = 2

    def check(self, where: str) -> None:
        if self.upsample_real < 0:  # 0: synthetic pairs only (a distilled corpus without the original pairs)
            raise ConfigError(f"{where}.upsample_real: must be >= 0, got {self.upsample_real!r}")
        _positive(
            where,
            synthetic_ratio=self.synthetic_ratio,
            max_ratio=self.max_ratio,
            repeat_ngram=self.repeat_ngram,
            max_repeats=self.max_repeats,
        )


@dataclass
class TablesConfig:
    """The ``tables`` section: what the result tables show; keys described in workflow/schemas/config.schema.yaml."""

    baseline: str | None = None
    metrics: list[str] = dataclasses.field(default_factory=lambda: ["bleu", "chrf", "ter"])
    bootstrap_samples: int = 1000
    bootstrap_seed: int = 12345
    published: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def check(self, where: str) -> None:
        _positive(where, bootstrap_samples=self.bootstrap_samples, bootstrap_seed=self.bootstrap_seed)
        for metric in self.metrics:
            if metric not in ("bleu", "chrf", "ter"):
                raise ConfigError(f"{where}.metrics: {metric!r} is not one of 'bleu', 'chrf', 'ter'")
