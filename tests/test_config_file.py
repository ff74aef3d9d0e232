"""nmt.config_file: a workflow config read as the workflow reads it (``--config`` overrides, YAML 1.1's habits, the
schema) and checked across keys, each error one line naming the key."""

import copy
import re

import pytest
import yaml
from test_experiment import DATA, SCHEMA, SCHEMA_PATH, TINY, TRAIN, experiment_of

from nmt.config_file import check_config, read_overrides, read_yaml_habits, reject_training_seeds
from nmt.errors import ConfigError


@pytest.mark.parametrize(
    "distillation, message",
    [
        ({"teacher": "nosuch", "students": ["student"]}, "distillation.teacher: 'nosuch' is not a key of models"),
        ({"teacher_stage": "distilled", "students": ["student"]}, "'transformer' is not trained on stage 'distilled'"),
        ({"teacher": "rnn", "teacher_stage": "bt_beam", "students": ["student"]}, "(its stages: baseline;"),
        ({"students": ["nosuch"]}, "distillation.students: 'nosuch' is not a key of models"),
        ({"students": ["convs2s"]}, "'convs2s' is a convs2s, which cannot be exported to CTranslate2"),
        (
            {"students": ["student"], "decoding": {"method": "beam"}},
            "distillation.decoding: the CTranslate2 rows cannot decode beam search with length_normalization gnmt",
        ),
    ],
)
def test_distillation_errors_name_the_key(distillation, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        experiment_of(distillation=distillation)
    # Without CTranslate2 rows, any architecture is a student and beam search its search.
    experiment_of(distillation={"students": ["convs2s"], "decoding": {"method": "beam"}, "ctranslate2": []})


TSV = {"url": "v.tsv", "tsv_columns": {"en": 0}}
VAL, MONO, TEST = (TINY["corpora"][name] for name in ("multi30k_val", "multi30k_mono1", "test_2016_flickr"))
ITERATED = {**TINY["backtranslation"], "iterations": 2}
ONE_LANGUAGE = {"importer": "local", "path": "news.tgz", "member": "news.de"}  # a member named without {lang}


@pytest.mark.parametrize(
    "sections, message",
    [
        # Data roles refer to corpora, never train on a dev/test set, and every pair's languages exist.
        ({"data": {**DATA, "train": ["nope"]}}, "data.train: corpus 'nope' is not defined under corpora"),
        ({"data": {**DATA, "test": ["nope"]}}, "data.test: corpus 'nope' is not defined under corpora"),
        ({"data": {**DATA, "mono": ["multi30k_val"]}}, "data.mono: corpus 'multi30k_val' is also a dev/test set"),
        ({"pairs": ["en-en"]}, "pairs: 'en-en' translates a language into itself"),
        (
            {"corpora": {**TINY["corpora"], "multi30k_val": TSV}},
            "corpora.multi30k_val.tsv_columns: no column for 'de' (needed by pair en-de)",
        ),
        # Back-translation models are models, and need monolingual data.
        ({"backtranslation": {"models": ["lstm"]}}, "backtranslation.models: 'lstm' is not a key of models"),
        ({"data": {**DATA, "mono": []}}, "backtranslation.models: back-translation needs monolingual corpora"),
        ({"tables": {"baseline": "lstm"}}, "tables.baseline: 'lstm' is not a key of models"),
        # Iterative back-translation translates the monolingual corpora's source side: each must have one.
        (
            {
                "backtranslation": ITERATED,
                "corpora": {**TINY["corpora"], "multi30k_mono1": {"url": "m.tsv", "tsv_columns": {"de": 0}}},
            },
            "backtranslation.iterations: 2 rounds translate source-language (en) monolingual text, but corpora."
            "multi30k_mono1 of data.mono has no 'en' side; give data.mono corpora with both languages, or set",
        ),
        (
            {"backtranslation": ITERATED, "corpora": {**TINY["corpora"], "multi30k_mono1": ONE_LANGUAGE}},
            "corpora.multi30k_mono1 of data.mono has no 'en' side",
        ),
        (
            {
                "subword": {**TINY["subword"], "joint": False},
                "models": {**TINY["models"], "rnn": {**TINY["models"]["rnn"], "share_embeddings": True}},
            },
            "models.rnn.share_embeddings: one embedding for both languages needs one subword model for both",
        ),
        # Values the schema lets through and nmt's dataclasses reject.
        ({"models": {"t": {"arch": "transformer", "d_modle": 8}}}, "models.t: unknown key 'd_modle'"),
        # the known keys listed with those a model entry takes besides its architecture's (training was left out)
        (
            {"models": {"t": {"arch": "rnn", "trainng": {"max_steps": 5}}}},
            "models.t: unknown key 'trainng' (known keys of a rnn: arch, size, training, ",
        ),
        ({"models": {"t": {"arch": "rnn", "size": "huge"}}}, "models.t.size: 'huge' is not a rnn size"),
        ({"models": {"t": {"arch": "rnn", "training": {"lr": "x"}}}}, "models.t.training.lr: expected float, got 'x'"),
        (
            {"backtranslation": {"models": [], "reverse_model": {"arch": "rnn", "layers": 2}}},
            "backtranslation.reverse_model: unknown key 'layers'",
        ),
        (
            {"backtranslation": {"variants": {"bt": {"generation": {"method": "nucleus"}}}}},
            "backtranslation.variants.bt.generation.method: 'nucleus' is not one of",
        ),
        ({"corpora": {**TINY["corpora"], "x": {"url": "https://a/b.txt"}}}, "corpora.x: 'https://a/b.txt' needs a"),
        # An official tokenized reference: one file per language, and only for the sets that are scored.
        (
            {"corpora": {**TINY["corpora"], "test_2016_flickr": {**TEST, "tokenized_ref": {"url": "https://a/t.tok"}}}},
            "corpora.test_2016_flickr.tokenized_ref.url: expected the file of each language with a {lang} placeholder",
        ),
        (
            {"corpora": {**TINY["corpora"], "multi30k_train": {**TRAIN, "tokenized_ref": {"url": "https://a/{lang}"}}}},
            "corpora.multi30k_train.tokenized_ref: 'multi30k_train' is training data",
        ),
        # Per-corpus cleaning and weights: values checked as in the cleaning section, only for training corpora.
        (
            {"corpora": {**TINY["corpora"], "multi30k_train": {**TRAIN, "cleaning": {"max_ratio": -1}}}},
            "corpora.multi30k_train.cleaning.max_ratio: must be > 0, got -1",
        ),
        (
            {"corpora": {**TINY["corpora"], "multi30k_val": {**VAL, "cleaning": {"langid": False}}}},
            "corpora.multi30k_val.cleaning: 'multi30k_val' is not a training corpus (data.train)",
        ),
        (
            {"corpora": {**TINY["corpora"], "multi30k_mono1": {**MONO, "weight": 2}}},
            "corpora.multi30k_mono1.weight: 'multi30k_mono1' is not a training corpus (data.train)",
        ),
        (
            {"models": {"t": {"arch": "rnn", "training": {"corpus_weights": {"a": 2}}}}},
            "models.t.training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)",
        ),
        (
            {"training": {**TINY["training"], "corpus_weights": {"a": 2}}},
            "training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)",
        ),
        ({"seeds": [1, -2]}, "seeds: a seed must be from 0 to 2147483647, got -2"),
        # a pair's corpus from an archive member named without {lang}: both sides would read it
        (
            {"corpora": {**TINY["corpora"], "test_2016_flickr": {"url": "t.tgz", "member": "test.en"}}},
            "corpora.test_2016_flickr.member: 'test.en' needs a {lang} placeholder: both languages of pair en-de",
        ),
        (
            {"backtranslation": {**TINY["backtranslation"], "seed": 2**40}},
            "backtranslation.seed: a seed must be from 0 to 2147483647, got 1099511627776",
        ),
        # runtime ctranslate2 where CTranslate2 cannot run the search: an RNN, ensembles of the tiny config's 2 seeds.
        (
            {"decoding": {"method": "greedy", "runtime": "ctranslate2"}, "seeds": [1]},
            "decoding.runtime: ctranslate2 cannot decode a rnn model (CTranslate2 has the Transformer only); runtime",
        ),
        (
            {
                "decoding": {"method": "greedy", "runtime": "ctranslate2"},
                "models": {name: TINY["models"][name] for name in ("transformer", "student")},
            },
            "decoding.runtime: ctranslate2 cannot decode an ensemble (of 2 models); runtime auto decodes it in torch",
        ),
        (
            {"distillation": {**TINY["distillation"], "generation": {"method": "greedy", "runtime": "ctranslate2"}}},
            "distillation.generation.runtime: ctranslate2 cannot decode an ensemble (of 2 models)",
        ),
        (
            {
                "backtranslation": {
                    **TINY["backtranslation"],
                    "reverse_model": {"arch": "rnn", "size": "tiny"},
                    "variants": {"bt": {"generation": {"method": "sample", "runtime": "ctranslate2"}}},
                }
            },
            "backtranslation.variants.bt.generation.runtime: ctranslate2 cannot decode a rnn model",
        ),
    ],
)
def test_errors_are_one_line_naming_the_key(sections, message):
    with pytest.raises(ConfigError) as excinfo:
        experiment_of(**sections)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_iterated_backtranslation_needs_no_source_side_without_models():
    """Without back-translation models there is nothing to iterate: iterations is no error, and no later round."""
    no_models = {**ITERATED, "models": []}
    experiment = experiment_of(backtranslation=no_models, corpora={**TINY["corpora"], "multi30k_mono1": ONE_LANGUAGE})
    assert experiment.backtranslation.later_rounds == []
    opus = {"importer": "opus", "corpus": "X", "version": "v1", "pair": "de-en"}
    assert experiment_of(backtranslation=ITERATED, corpora={**TINY["corpora"], "multi30k_mono1": opus})


def test_command_line_overrides_are_read_as_yaml():
    schema = SCHEMA["properties"]
    # Snakemake gives nested --config values as strings: read them as the config file would give them.
    assert read_overrides(["1", "2"], schema["seeds"], "seeds") == [1, 2]
    assert read_overrides({"max_steps": "100"}, schema["training"], "training") == {"max_steps": 100}
    assert read_overrides({"t": {"arch": "rnn", "d_model": "8"}}, schema["models"], "models") == {
        "t": {"arch": "rnn", "d_model": 8}
    }
    # A string where the schema wants one stays a string ("1.0" is a version, not a number).
    opus = read_overrides({"x": {"version": "1.0"}}, schema["corpora"], "corpora")
    assert opus == {"x": {"version": "1.0"}}
    with pytest.raises(ConfigError, match=r"^key 'seeds': --config value '\[1, 2' is not YAML"):
        read_overrides("[1, 2", schema["seeds"], "seeds")


def test_plain_yaml_switches_and_numbers_are_read_as_the_schema_means():
    """YAML 1.1 reads ``bf16: on`` as True and ``1e-3`` as a string; the schema's keys are read again, and the
    sections it does not spell out (a model's ``training``) by nmt.config.from_dict."""
    sections = yaml.safe_load(
        "training: {bf16: on, lr: 1e-3, max_steps: 1e3, adam_betas: [9e-1, 0.98]}\n"
        "decoding: {max_len_a: 2e0}\n"
        "models: {transformer: {arch: transformer, size: tiny, dropout: 1e-1, training: {bf16: off, lr: 5e-4}}}\n"
    )
    assert sections["training"]["bf16"] is True and sections["training"]["lr"] == "1e-3"
    config = read_yaml_habits(copy.deepcopy(TINY) | sections, SCHEMA)
    assert config["training"] == {"bf16": "on", "lr": 0.001, "max_steps": 1000, "adam_betas": [0.9, 0.98]}
    assert config["decoding"] == {"max_len_a": 2.0} and config["models"]["transformer"]["dropout"] == 0.1
    assert config["data"] == TINY["data"] and config["seeds"] == TINY["seeds"]  # the rest as it was
    experiment = experiment_of(**config | {"distillation": {}})
    training = experiment.models["transformer"].training
    assert training.bf16 == "off" and training.lr == 5e-4
    assert experiment.decoding.max_len_a == 2.0
    # A string that is no number stays a string, for the schema to name.
    assert read_yaml_habits({"lr": "fast", "device": True}, SCHEMA["properties"]["training"]) == {
        "lr": "fast",
        "device": True,
    }


def test_training_seed_is_rejected():
    reject_training_seeds({"training": {"lr": 1}, "models": {"t": {"arch": "rnn"}}})
    with pytest.raises(ConfigError, match="key 'models.t.training.seed': set the top-level list 'seeds'"):
        reject_training_seeds({"models": {"t": {"arch": "rnn", "training": {"seed": 2}}}})


def test_check_config_merges_the_command_line_overrides():
    config = copy.deepcopy(TINY)
    check_config(config, SCHEMA_PATH, {"seeds": ["3"], "training": {"max_steps": "7"}})
    assert config["seeds"] == [3] and config["training"]["max_steps"] == 7
    assert config["training"]["lr"] == TINY["training"]["lr"]  # the rest of the section as it was
    with pytest.raises(ConfigError, match=r"^key 'training.max_steps': 'many' is not of type 'integer'"):
        check_config(copy.deepcopy(TINY), SCHEMA_PATH, {"training": {"max_steps": "many"}})


def test_an_unknown_key_of_a_tokenized_reference_is_one_line():
    config = copy.deepcopy(TINY)
    config["corpora"]["test_2016_flickr"]["tokenized_ref"]["sha"] = {}
    with pytest.raises(ConfigError) as excinfo:
        check_config(config, SCHEMA_PATH, {})
    message = str(excinfo.value)
    assert "key 'corpora.test_2016_flickr.tokenized_ref'" in message and "'sha' was unexpected" in message
    assert "\n" not in message


def staged(*stages, variants=None):
    """The tiny config with the Transformer's training stages replaced (and the back-translation variants)."""
    model = {**TINY["models"]["transformer"], "training": {"stages": list(stages)}}
    sections = {"models": {**TINY["models"], "transformer": model}}
    if variants is not None:
        sections["backtranslation"] = {**TINY["backtranslation"], "variants": variants}
    return sections


@pytest.mark.parametrize(
    "sections, message",
    [
        (staged({"data": {"nosuch": 1}}), "models.transformer.training.stages[0].data.nosuch: not a training corpus"),
        (staged({"data": {"real": 0}}), "stages[0].data.real: must be a share > 0, got 0"),
        (staged({"data": {}}), "stages[0].data: must map corpus names to shares"),
        (staged({"data": {"real": 1, "multi30k_train": 1}}), "stages[0].data: names 'real' and a training corpus"),
        (staged({"max_steps": 5}, {"data": {"synthetic": 1}}), "stages[1].data: synthetic data only"),
        (staged("fast"), "stages[0]: must be a mapping of training keys and a data mix"),
        (staged({"data": {"real": 1}, "nosuch": 2}), "unknown key 'nosuch'"),
        (
            staged({"data": {"real": 1}}, variants={"bt": {"upsample_real": 2}}),
            "backtranslation.variants.bt.upsample_real: 'transformer' trains in stages that each set their data mix",
        ),
    ],
)
def test_training_stage_errors_name_the_key(sections, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        experiment_of(**sections)


def test_a_stage_without_data_keeps_upsample_real_meaningful():
    experiment_of(**staged({"max_steps": 5}, {"data": {"real": 1}}, variants={"bt": {"upsample_real": 2}}))
