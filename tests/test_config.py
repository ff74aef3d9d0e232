"""Config dataclasses: loud errors, and the schema documents the same defaults as the code."""

import dataclasses

import pytest
import yaml
from conftest import REPO

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
from nmt.model import resolve_model_options

SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())


@pytest.mark.parametrize(
    "cls, data, message",
    [
        (TrainConfig, {"lrr": 1}, "train: unknown key 'lrr'"),
        (TrainConfig, {"lr": "fast"}, "train.lr: expected float, got 'fast'"),
        (TrainConfig, {"lr": -1}, "train.lr: must be > 0"),
        (TrainConfig, {"max_steps": True}, "train.max_steps: expected int"),
        (TrainConfig, {"valid_metric": "ter"}, "train.valid_metric: 'ter' is not one of 'bleu', 'loss'"),
        (SubwordConfig, {"model_type": "wordpiece"}, "train.model_type: 'wordpiece' is not one of"),
        (DecodeConfig, {"beam_size": 0}, "train.beam_size: must be > 0"),
        (DecodeConfig, {"method": "nucleus"}, "train.method: 'nucleus' is not one of 'beam', 'greedy', 'sample'"),
        (DecodeConfig, {"sampling_topk": -1}, "train.sampling_topk: must be >= 0"),
        (SyntheticConfig, {"upsample_real": 0}, "train.upsample_real: must be > 0"),
        (SyntheticConfig, {"tag": True}, "train: unknown key 'tag'"),
        (CorpusConfig, {"importer": "hf"}, "train.importer: 'hf' is not one of 'url', 'local', 'opus', 'sacrebleu'"),
        (CorpusConfig, {"importer": "sacrebleu", "test_set": "wmt14"}, "importer 'sacrebleu' needs the key 'langpair'"),
        (CorpusConfig, {"url": "a.txt", "member": "m", "tsv_columns": {"en": 0}}, "member and tsv_columns exclude"),
        (CleanConfig, {"min_alpha": 1.5}, "train.min_alpha: must be in [0, 1]"),
        (CleanConfig, [], "train: expected a mapping"),
    ],
)
def test_bad_values_fail_with_one_line_naming_the_key(cls, data, message):
    with pytest.raises(ConfigError) as e:
        from_dict(cls, data, "train")
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_from_dict_converts_ints_and_lists():
    config = from_dict(TrainConfig, {"lr": 1, "adam_betas": [0.9, 0.99]}, "train")
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.adam_betas == (0.9, 0.99)


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


@pytest.mark.parametrize(
    "options, message",
    [
        ({"arch": "lstm"}, "models.x.arch: 'lstm' is not one of"),
        ({"arch": "transformer", "preset": "huge"}, "models.x.preset: 'huge' is not a transformer preset"),
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
    _, base = resolve_model_options({"arch": "transformer", "preset": "base"}, "m")
    _, big = resolve_model_options({"arch": "transformer", "preset": "big"}, "m")
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
    _, small = resolve_model_options({"arch": "transformer", "preset": "small", "dropout": 0.2}, "m")
    assert small.dropout == 0.2 and small.d_model == 256


def test_schema_documents_every_corpus_key():
    properties = SCHEMA["properties"]["corpora"]["additionalProperties"]["properties"]
    assert set(properties) == {f.name for f in dataclasses.fields(CorpusConfig)}
    assert all("description" in p for p in properties.values())
