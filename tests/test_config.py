"""Config dataclasses: loud errors, and the schema documents the same defaults as the code."""

import dataclasses
import re

import pytest
import yaml
from conftest import REPO

from nmt.__main__ import build_parser, decode_config
from nmt.config import (
    CleanConfig,
    CorpusConfig,
    DecodeConfig,
    SubwordConfig,
    SyntheticConfig,
    TablesConfig,
    TrainConfig,
    from_dict,
)
from nmt.errors import ConfigError
from nmt.model_config import resolve_model_options

SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())


@pytest.mark.parametrize(
    "cls, data, message",
    [
        (TrainConfig, {"lrr": 1}, "train: unknown key 'lrr'"),
        (TrainConfig, {"lr": "fast"}, "train.lr: expected float, got 'fast'"),
        (TrainConfig, {"lr": -1}, "train.lr: must be > 0"),
        (TrainConfig, {"max_steps": True}, "train.max_steps: expected int"),
        (TrainConfig, {"valid_metric": "ter"}, "train.valid_metric: 'ter' is not one of 'bleu', 'chrf', 'loss'"),
        (TrainConfig, {"valid_beam_size": 0}, "train.valid_beam_size: must be > 0"),
        (TrainConfig, {"trg_lang": "German"}, "train.trg_lang: 'German' is not a language code"),
        (SubwordConfig, {"model_type": "wordpiece"}, "train.model_type: 'wordpiece' is not one of"),
        (DecodeConfig, {"beam_size": 0}, "train.beam_size: must be > 0"),
        (DecodeConfig, {"method": "nucleus"}, "train.method: 'nucleus' is not one of 'beam', 'greedy', 'sample'"),
        (DecodeConfig, {"sampling_topk": -1}, "train.sampling_topk: must be >= 0"),
        (SyntheticConfig, {"upsample_real": -1}, "train.upsample_real: must be >= 0"),  # 0: a distilled corpus alone
        (SyntheticConfig, {"tag": True}, "train: unknown key 'tag'"),
        (CorpusConfig, {"importer": "hf"}, "train.importer: 'hf' is not one of 'url', 'local', 'opus', 'sacrebleu'"),
        (CorpusConfig, {"importer": "sacrebleu", "test_set": "wmt14"}, "importer 'sacrebleu' needs the key 'langpair'"),
        (CorpusConfig, {"url": "a.txt", "member": "m", "tsv_columns": {"en": 0}}, "member and tsv_columns exclude"),
        # both languages would read the same text: a test set's source its own reference
        (CorpusConfig, {"url": "a.tsv", "tsv_columns": {"en": 0, "cs": 0}}, "train.tsv_columns: two languages read"),
        (CleanConfig, {"min_alpha": 1.5}, "train.min_alpha: must be in [0, 1]"),
        (TrainConfig, {"optimizer": "sgd"}, "train.optimizer: 'sgd' is not one of 'adam', 'nesterov'"),
        (TrainConfig, {"lr_schedule": "step"}, "train.lr_schedule: 'step' is not one of 'inverse_sqrt'"),
        (TrainConfig, {"anneal_factor": 1.0}, "train.anneal_factor: must be in (0, 1), got 1.0"),
        (TrainConfig, {"momentum": 1}, "train.momentum: must be in [0, 1), got 1.0"),
        (TrainConfig, {"average_last": 0}, "train.average_last: must be > 0, got 0"),
        (TrainConfig, {"average_last": 2.5}, "train.average_last: expected int, got 2.5"),
        (TrainConfig, {"lr_schedule": "anneal_on_plateau", "lr": 1e-4}, "train.min_lr: must be below lr (0.0001)"),
        (CleanConfig, [], "train: expected a mapping"),
        # seeds beyond what numpy, sentencepiece and CTranslate2 take were tracebacks at their first use
        (TrainConfig, {"seed": -1}, "train.seed: a seed must be from 0 to 2147483647, got -1"),
        (TrainConfig, {"seed": 2**70}, "train.seed: a seed must be from 0 to 2147483647, got 1180591620717411303424"),
        (DecodeConfig, {"seed": 2**32}, "train.seed: a seed must be from 0 to 2147483647"),
        (SubwordConfig, {"seed": -5}, "train.seed: a seed must be from 0 to 2147483647"),
        (CleanConfig, {"seed": 2**31}, "train.seed: a seed must be from 0 to 2147483647"),
        (CorpusConfig, {"url": "u{lang}", "cleaning": {"langidd": False}}, "train.cleaning: unknown key 'langidd'"),
        (
            CorpusConfig,
            {"url": "u{lang}", "cleaning": {"normalize_punctuation": False}},
            "train.cleaning.normalize_punctuation: set it in the cleaning section only",
        ),
        (CorpusConfig, {"url": "u{lang}", "weight": 0}, "train.weight: must be > 0, got 0"),
        (CorpusConfig, {"url": "u{lang}", "weight": "x2"}, "train.weight: expected float, got 'x2'"),
        (TrainConfig, {"corpus_weights": {"a": 1, "b": 0}}, "train.corpus_weights.b: must be a number > 0, got 0"),
        (TrainConfig, {"corpus_weights": [1, 2]}, "train.corpus_weights: expected a mapping, got [1, 2]"),
        (TrainConfig, {"mix": {"a": 0.6, "b": -1}}, "train.mix.b: must be a number > 0, got -1"),
        (TrainConfig, {"mix": {"a": 1}, "corpus_weights": {"a": 2}}, "train.mix: not with corpus_weights"),
        (TrainConfig, {"stages": [{"max_steps": 5}, {"seed": 2}]}, "train.stages[1].seed: not a key of a stage"),
        (TrainConfig, {"stages": [{"init_from": "m"}]}, "train.stages[0].init_from: not a key of a stage"),
        (TrainConfig, {"stages": [{"stages": []}]}, "train.stages[0].stages: not a key of a stage"),
        (TrainConfig, {"stages": [{"lrr": 1}]}, "train.stages[0]: unknown key 'lrr' (known keys: seed,"),
        (TrainConfig, {"stages": [{"lr": "fast"}]}, "train.stages[0].lr: expected float, got 'fast'"),
        (TrainConfig, {"stages": [5]}, "train.stages[0]: expected a mapping of training keys, got 5"),
        (TrainConfig, {"stages": []}, "train.stages: an empty list"),
        # a stage's keys over the enclosing ones, checked together: a stage's mix beside the enclosing weights
        (TrainConfig, {"corpus_weights": {"a": 2}, "stages": [{"mix": {"a": 1}}]}, "train.stages[0].mix: not with"),
    ],
)
def test_bad_values_fail_with_one_line_naming_the_key(cls, data, message):
    with pytest.raises(ConfigError) as e:
        from_dict(cls, data, "train")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_corpus_cleaning_updates_the_cleaning_section():
    corpus = from_dict(CorpusConfig, {"url": "u{lang}", "cleaning": {"langid": False, "max_ratio": 2}}, "corpora.ep")
    cleaning = from_dict(CleanConfig, {"max_ratio": 2.5, "min_alpha": 0.4}, "cleaning")
    updated = cleaning.updated(corpus.cleaning, "corpora.ep.cleaning")
    assert (updated.langid, updated.max_ratio, updated.min_alpha) == (False, 2.0, 0.4)
    assert cleaning.langid is True, "the section itself is unchanged"
    with pytest.raises(ConfigError) as e:
        cleaning.updated({"langid": "no"}, "corpora.ep.cleaning")
    assert str(e.value) == "corpora.ep.cleaning.langid: expected bool, got 'no'"
    # Fetching does not depend on the cleaning keys and the weight: changing them fetches nothing again.
    weighted = from_dict(CorpusConfig, {"url": "u{lang}", "cleaning": {"dedup": False}, "weight": 3}, "c")
    assert weighted.import_settings() == from_dict(CorpusConfig, {"url": "u{lang}"}, "c").import_settings()
    assert "cleaning" not in weighted.import_settings() and weighted.weight == 3.0


def test_from_dict_converts_ints_and_lists():
    config = from_dict(TrainConfig, {"lr": 1, "adam_betas": [0.9, 0.99]}, "train")
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.adam_betas == (0.9, 0.99)


def test_plain_yaml_switches_and_numbers_are_read_as_meant():
    """YAML 1.1 (PyYAML, Snakemake) reads ``bf16: on`` as True and ``1e-3`` (no dot) as a string."""
    data = yaml.safe_load("bf16: on\nlr: 1e-3\nmax_steps: 1e4\nmin_lr: 5E-5\nlabel_smoothing: '.1'")
    assert data == {"bf16": True, "lr": "1e-3", "max_steps": "1e4", "min_lr": "5E-5", "label_smoothing": ".1"}
    config = from_dict(TrainConfig, data, "train")
    values = (config.bf16, config.lr, config.max_steps, config.min_lr, config.label_smoothing)
    assert values == ("on", 1e-3, 10000, 5e-5, 0.1)
    assert isinstance(config.max_steps, int)
    assert from_dict(TrainConfig, yaml.safe_load("bf16: off"), "train").bf16 == "off"
    assert from_dict(DecodeConfig, {"max_len_a": "2e0", "max_len_b": "1e1"}, "d").max_len_b == 10
    # What is no number, or no whole number where one is wanted, or a boolean where no choice is on/off, stays wrong.
    for data, message in [
        ({"max_steps": "1.5e0"}, "train.max_steps: expected int, got '1.5e0'"),
        ({"lr": "1e-3x"}, "train.lr: expected float, got '1e-3x'"),
        ({"lr": "nan"}, "train.lr: expected float, got 'nan'"),
        ({"device": True}, "train.device: True is not one of 'auto', 'cpu', 'cuda'"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            from_dict(TrainConfig, data, "train")


VARIANT = SCHEMA["properties"]["backtranslation"]["properties"]["variants"]["additionalProperties"]["properties"]


@pytest.mark.parametrize(
    "properties, cls",
    [
        (SCHEMA["properties"]["cleaning"]["properties"], CleanConfig),
        (SCHEMA["properties"]["subword"]["properties"], SubwordConfig),
        (SCHEMA["properties"]["training"]["properties"], TrainConfig),
        (SCHEMA["properties"]["decoding"]["properties"], DecodeConfig),
        ({k: v for k, v in VARIANT.items() if k != "generation"}, SyntheticConfig),
        (SCHEMA["properties"]["tables"]["properties"], TablesConfig),
    ],
)
def test_schema_documents_every_field_with_the_code_default(properties, cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(properties) == set(fields)
    for name, field in fields.items():
        assert "description" in properties[name], name
        default = properties[name]["default"]
        code = field.default_factory() if field.default is dataclasses.MISSING else field.default
        if isinstance(code, list):
            assert default == code, name
        else:
            assert (tuple(default) if isinstance(default, list) else default) == code, name


def test_the_command_line_searches_with_the_config_defaults():
    """``nmt translate`` without options searches as a workflow config without a ``decoding`` section; with
    ``--runtime ctranslate2`` by greedy search, which CTranslate2 runs as we do (its beam search is not ours)."""
    assert decode_config(build_parser().parse_args(["translate", "--model", "m"])) == DecodeConfig()
    args = build_parser().parse_args(["translate", "--model", "m", "--runtime", "ctranslate2"])
    assert decode_config(args) == DecodeConfig(method="greedy", runtime="ctranslate2")
    args = build_parser().parse_args(["translate", "--model", "m", "--runtime", "ctranslate2", "--method", "sample"])
    assert decode_config(args).method == "sample"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"arch": "lstm"}, "models.x.arch: 'lstm' is not one of"),
        ({"arch": "transformer", "size": "huge"}, "models.x.size: 'huge' is not a transformer size"),
        ({"arch": "transformer", "d_modle": 3}, "models.x: unknown key 'd_modle'"),
        ({"arch": "transformer", "enc_layers": -2}, "models.x.enc_layers: must be > 0, got -2"),
        ({"arch": "transformer", "dec_layers": 0}, "models.x.dec_layers: must be > 0, got 0"),
        ({"arch": "transformer", "n_heads": 0}, "models.x.n_heads: must be > 0, got 0"),
        ({"arch": "transformer", "d_model": 250, "n_heads": 4}, "models.x.n_heads: d_model 250 is not divisible by"),
        ({"arch": "transformer", "d_model": 65, "n_heads": 5}, "models.x.d_model: must be even"),
        ({"arch": "transformer", "dropout": 1.5}, "models.x.dropout: must be in \\[0, 1\\), got 1.5"),
        ({"arch": "transformer", "ff_dim": 0}, "models.x.ff_dim: must be > 0"),
        ({"arch": "transformer", "max_positions": 0}, "models.x.max_positions: must be > 0"),
        ({"arch": "rnn", "enc_layers": -2}, "models.x.enc_layers: must be > 0, got -2"),
        ({"arch": "rnn", "hidden_size": 0}, "models.x.hidden_size: must be > 0"),
        ({"arch": "rnn", "dropout": 1.5}, "models.x.dropout: must be in \\[0, 1\\), got 1.5"),
        ({"arch": "convs2s", "kernel_size": (2,)}, "models.x.kernel_size: must be odd"),
        ({"arch": "convs2s", "kernel_size": (0,)}, "models.x.kernel_size: must be positive integers"),
        ({"arch": "convs2s", "channels": (256, 256)}, "models.x.channels: needs one value or one per layer"),
        ({"arch": "convs2s", "max_positions": 0}, "models.x.max_positions: must be > 0"),
        ({"arch": "convs2s", "dropout": -0.1}, "models.x.dropout: must be in \\[0, 1\\)"),
    ],
)
def test_model_options_are_checked(options, message):
    with pytest.raises(ConfigError, match=message) as excinfo:
        resolve_model_options(options, "models.x")
    assert "\n" not in str(excinfo.value)


def test_presets_match_the_paper():
    _, base = resolve_model_options({"arch": "transformer", "size": "base"}, "m")
    _, big = resolve_model_options({"arch": "transformer", "size": "big"}, "m")
    assert (base.enc_layers, base.dec_layers, base.d_model, base.n_heads, base.ff_dim, base.dropout) == (
        6,
        6,
        512,
        8,
        2048,
        0.1,
    )
    assert (big.enc_layers, big.dec_layers, big.d_model, big.n_heads, big.ff_dim, big.dropout) == (
        6,
        6,
        1024,
        16,
        4096,
        0.3,
    )
    assert base.norm == big.norm == "post"
    _, small = resolve_model_options({"arch": "transformer", "size": "small", "dropout": 0.2}, "m")
    assert small.dropout == 0.2 and small.d_model == 256


def test_schema_documents_every_corpus_key():
    properties = SCHEMA["properties"]["corpora"]["additionalProperties"]["properties"]
    assert set(properties) == {f.name for f in dataclasses.fields(CorpusConfig)}
    assert all("description" in p for p in properties.values())


@pytest.mark.parametrize("pair", ["en_de", "en_fr"])
def test_wmt14_presets_train_as_the_papers(pair):
    """Vaswani et al. 2017 (Transformer) and Gehring et al. 2017 (ConvS2S) settings in the WMT14 presets."""
    preset = yaml.safe_load((REPO / f"workflow/presets/wmt14_{pair}.yaml").read_text())
    models = preset["models"]
    shared = preset["training"]
    train = {name: from_dict(TrainConfig, {**shared, **m.get("training", {})}, name) for name, m in models.items()}
    for name, average in (("transformer_base", 5), ("transformer_big", 20)):
        config = train[name]
        assert (config.optimizer, config.lr_schedule, config.warmup_steps) == ("adam", "inverse_sqrt", 4000)
        assert (config.adam_betas, config.adam_eps, config.label_smoothing) == ((0.9, 0.98), 1e-9, 0.1)
        assert config.average_last == average and config.batch_tokens == 25000
    assert (train["transformer_base"].lr, train["transformer_big"].lr) == (0.0007, 0.0005)
    _, big = resolve_model_options({k: v for k, v in models["transformer_big"].items() if k != "training"}, "m")
    assert big.dropout == (0.3 if pair == "en_de" else 0.1)
    convs2s = train["convs2s"]
    assert (convs2s.optimizer, convs2s.lr, convs2s.momentum, convs2s.clip_norm) == ("nesterov", 0.25, 0.99, 0.1)
    assert (convs2s.lr_schedule, convs2s.anneal_factor, convs2s.min_lr) == ("anneal_on_plateau", 0.1, 1e-4)
    decoding = from_dict(DecodeConfig, preset["decoding"], "decoding")
    assert (decoding.beam_size, decoding.length_penalty, decoding.max_len_a, decoding.max_len_b) == (4, 0.6, 1.0, 50)
    # Our cleaning per corpus: no language identification for the curated corpora, the section's for the crawled.
    curated = {"europarl_v7", "news_commentary_v9"} | ({"un"} if pair == "en_fr" else set())
    for name in preset["data"]["train"]:
        corpus = from_dict(CorpusConfig, preset["corpora"][name], name)
        assert corpus.cleaning == ({"langid": False} if name in curated else {}), name
        assert corpus.weight == 1
