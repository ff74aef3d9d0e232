"""Systems of many languages: the config's multilingual and pivot sections (nmt.multilingual, the rows and trainings
nmt.experiment gives them), the tagged corpora (nmt.data.tagging), temperature weights, and a multilingual model
trained on the toy task whose meta.json makes translation put the right tag first (nmt.model_dir)."""

import copy
import json

import numpy as np
import pytest
import yaml
from conftest import LEXICON, REPO, TOY_MODEL, make_toy_corpus, tiny_train_config, write_lines
from snakemake.utils import validate

from nmt.config import DecodeConfig, SubwordConfig
from nmt.config_file import check_config, load_experiment
from nmt.data.batches import temperature_weights, weighted_epoch
from nmt.data.subword import load_subword, train_subword_model
from nmt.data.tagging import tag_corpus
from nmt.decoding.streaming import translate_file
from nmt.errors import ConfigError, DataError
from nmt.experiment import Run
from nmt.model_dir import META_FILE, normalize_input, tag_input
from nmt.training.files import TrainFiles
from nmt.training.loop import train
from nmt.training.validation import score_directions

TINY = yaml.safe_load((REPO / "tests/integration/multilingual/config.yaml").read_text())
SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"


def experiment_of(**sections):
    """The tiny multilingual config with whole sections replaced, checked and validated as the workflow does."""
    config = copy.deepcopy(TINY) | copy.deepcopy(sections)
    check_config(config, SCHEMA_PATH, {})
    validate(config, str(SCHEMA_PATH))
    return load_experiment(config)


def test_rows_of_each_pair_and_their_significance_reference():
    experiment = experiment_of(seeds=[1, 2])
    # fr-en trains on en-fr's corpora read the other way; de-fr has no data: only zero-shot and pivot rows.
    assert experiment.eval_pairs == ["en-de", "de-en", "en-fr", "fr-en", "de-fr"]
    assert experiment.data_pair("fr-en") == "en-fr" and experiment.data_pair("de-en") == "de-en"
    assert experiment.pair_runs("fr-en") == [Run("m2m", "multilingual", r) for r in ("seed1", "seed2", "ensemble")]
    # A pair of the config: its bilingual baseline first, the multilingual rows tested against it.
    compared = experiment.pair_compared_runs("en-de")
    assert compared[0] == Run("transformer", "baseline", "seed1") and compared[-1] == Run(
        "m2m", "multilingual", "ensemble"
    )
    # A pair without data: the baseline model's pivot cascade is the reference, the zero-shot rows are tested.
    compared = experiment.pair_compared_runs("de-fr")
    assert compared[0] == Run("transformer", "pivot", "seed1")
    assert Run("m2m", "zero_shot", "seed2") in compared and Run("transformer", "pivot", "seed2") not in compared
    pivot = experiment.system_row("de-fr", "t", Run("transformer", "pivot", "seed1"), "h", "r")
    assert (pivot["data"], pivot["arch"], "shared_by" in pivot) == ("pivot via en", "transformer", False)
    zero = experiment.system_row("de-fr", "t", Run("m2m", "zero_shot", "ensemble"), "h", "r")
    assert (zero["model"], zero["stage"], zero["data"]) == ("m2m", "zero_shot", "zero-shot (m2m: 4 directions, T=2)")
    assert zero["shared_by"] == 5 and zero["members"] == 2  # 4 directions and de-fr share the model


def test_a_systems_training_meta_and_subword_model():
    experiment = experiment_of()
    system = experiment.multilingual.systems["m2m"]
    assert system.tags == ["<2en>", "<2de>", "<2fr>"] and system.langs == ["de", "en", "fr"]
    training = experiment.multilingual_training("m2m", 3)
    # The model's training, the system's own keys, the temperature; from scratch; BLEU's default tokenizer.
    assert (training.seed, training.max_steps, training.lr, training.temperature) == (3, 60, 0.002, 2)
    assert (training.trg_lang, training.init_from, training.corpus_weights) == ("", None, None)
    meta = experiment.multilingual_meta("m2m")
    assert (meta.src_lang, meta.trg_lang, meta.directions) == ("", "", ["de-en", "en-de", "en-fr", "fr-en"])
    assert system.subword.joint and system.subword.vocab_size == 300
    one2many = experiment_of(multilingual={"o": {"directions": ["en-de", "en-fr"], "model": "transformer"}})
    assert one2many.multilingual_meta("o").src_lang == "en"
    assert one2many.eval_pairs == ["en-de", "de-en", "en-fr", "de-fr"]  # the pivot's pair


@pytest.mark.parametrize(
    "sections, message",
    [
        (
            {"multilingual": {"m": {"directions": ["en-de", "en-cs"], "model": "transformer"}}},
            "multilingual.m.directions: 'en-cs' has no data (neither en-cs nor cs-en is in pairs); add one of them "
            "to pairs, or translate it as a zero-shot direction (zero_shot)",
        ),
        (  # a pivot is offered where the pairs make its chain: de-en and en-fr
            {"multilingual": {"m": {"directions": ["en-de", "de-fr"], "model": "transformer"}}},
            "multilingual.m.directions: 'de-fr' has no data (neither de-fr nor fr-de is in pairs); add one of them "
            "to pairs, or translate it by pivot (pivot: {de-fr: en}) or as a zero-shot direction (zero_shot)",
        ),
        (
            {"multilingual": {"m": {"directions": ["de-en", "en-fr"], "model": "transformer", "zero_shot": ["fr-de"]}}},
            "multilingual.m.zero_shot: 'fr-de' needs the tag <2de>, which is not in the subword model of m (its "
            "tags: <2en>, <2fr>: its target languages)",
        ),
        (
            {"multilingual": {"m": {"directions": ["en-de", "en-fr"], "model": "transformer", "zero_shot": ["cs-de"]}}},
            "multilingual.m.zero_shot: 'cs-de' translates from cs, which is not in the subword model of m",
        ),
        (
            {"pivot": {"fr-de": "en"}},
            "pivot.fr-de: the chain fr-en-de needs a bilingual model for each step, but fr-en",
        ),
        ({"pivot": {"de-fr": ["en", "de"]}}, "pivot.de-fr: the chain de-en-de-fr passes a language twice"),
        (
            {"multilingual": {"transformer": {"directions": ["en-de", "de-en"], "model": "transformer"}}},
            "multilingual.transformer: 'transformer' names a model too",
        ),
        (
            {"multilingual": {"m": {"directions": ["en-de", "de-en"], "model": "rnn"}}},
            "multilingual.m.model: 'rnn' is not a key of models (defined: transformer)",
        ),
        (
            {
                "multilingual": {
                    "m": {"directions": ["en-de", "de-en"], "model": "transformer", "training": {"mix": {}}}
                }
            },
            "multilingual.m.training.mix: not a key of a multilingual system's training",
        ),
        (
            {
                "multilingual": {
                    "m": {"directions": ["en-de", "de-en"], "model": "transformer", "subword": {"joint": False}}
                }
            },
            "multilingual.m.subword.joint: a multilingual system's subword model is always joint",
        ),
        (
            {"models": {"transformer": {"arch": "transformer", "training": {"stages": [{"data": {"real": 1}}]}}}},
            "multilingual.m2m: 'transformer' trains in stages with data mixes",
        ),
        ({"training": {**TINY["training"], "temperature": 5}}, "training.temperature: set a multilingual system's"),
        (
            {
                "multilingual": {
                    "m": {"directions": ["en-de", "de-en"], "model": "transformer", "training": {"seed": 2}}
                }
            },
            "key 'multilingual.m.training.seed': set the top-level list 'seeds' instead",
        ),
    ],
)
def test_bad_sections_are_one_line_naming_the_key(sections, message):
    with pytest.raises(ConfigError) as excinfo:
        experiment_of(**sections)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


@pytest.mark.parametrize(
    "parts, temperature, shares",
    [
        ([100, 100, 100], 5, None),  # equal sizes: every pair once, whatever T
        ([900, 100], 1, None),  # T = 1: proportional to size
        ([900, 100], 2, [0.75, 0.25]),  # sqrt(900) : sqrt(100)
        ([900, 100], 1000, [0.5, 0.5]),  # towards uniform
    ],
)
def test_temperature_weights_draw_each_corpus_with_its_probability(parts, temperature, shares):
    weights = temperature_weights(np.array(parts), temperature)
    if shares is None:
        assert weights is None
        return
    drawn = np.array(parts) * np.array(weights)
    assert drawn.sum() == pytest.approx(sum(parts))  # an epoch as long as the corpora together
    assert drawn / drawn.sum() == pytest.approx(shares, abs=1e-3)
    epoch = weighted_epoch(np.array(parts), weights, seed=1, epoch=1)  # the existing draw of weighted corpora
    assert np.bincount(epoch >= parts[0]) / len(epoch) == pytest.approx(shares, abs=2e-3)


def test_tagged_corpus_and_its_line_count_check(tmp_path):
    src = [write_lines(tmp_path / "a.en", ["a man", "", "a dog"]), write_lines(tmp_path / "b.en", ["red"])]
    trg = [write_lines(tmp_path / "a.de", ["ein mann", "", "ein hund"]), write_lines(tmp_path / "b.fr", ["rouge"])]
    assert tag_corpus(src, trg, ["de", "fr"], tmp_path / "out.src", tmp_path / "out.trg") == 4
    assert (tmp_path / "out.src").read_text().splitlines() == ["<2de> a man", "<2de> ", "<2de> a dog", "<2fr> red"]
    assert (tmp_path / "out.trg").read_text().splitlines() == ["ein mann", "", "ein hund", "rouge"]
    write_lines(tmp_path / "short.de", ["ein mann"])
    with pytest.raises(DataError, match="the target side ends after 1 lines"):
        tag_corpus(src[:1], [tmp_path / "short.de"], ["de"], tmp_path / "x.src", tmp_path / "x.trg")
    assert not (tmp_path / "x.src").exists() and not (tmp_path / "x.trg").exists()


# A second toy target language: each German word of the lexicon reversed ("haus" -> "suah").
REVERSED = {word: german[::-1] for word, german in LEXICON.items()}


@pytest.fixture(scope="module")
def one_to_many(tmp_path_factory):
    """A one-to-many model of the toy task, en -> de and en -> xx (German words reversed), trained as the workflow
    trains a multilingual system: tagged corpora, a joint subword model with the tags, temperature weights."""
    root = tmp_path_factory.mktemp("one2many")
    src, de = make_toy_corpus(600, 1)
    xx = [" ".join(word[::-1] for word in line.split()) for line in de]
    files = {"en": write_lines(root / "train.en", src), "de": write_lines(root / "train.de", de)}
    files["xx"] = write_lines(root / "train.xx", xx[:300])  # the smaller direction: drawn more often at T = 5
    write_lines(root / "half.en", src[:300])
    tag_corpus([files["en"]], [files["de"]], ["de"], root / "en-de.en", root / "en-de.de")
    tag_corpus([root / "half.en"], [files["xx"]], ["xx"], root / "en-xx.en", root / "en-xx.xx")
    dev_src, dev_de = make_toy_corpus(20, 2)
    dev_xx = [" ".join(word[::-1] for word in line.split()) for line in dev_de]
    dev = {"en": write_lines(root / "dev.en", dev_src), "de": write_lines(root / "dev.de", dev_de)}
    dev["xx"] = write_lines(root / "dev.xx", dev_xx)
    tag_corpus([dev["en"], dev["en"]], [dev["de"], dev["xx"]], ["de", "xx"], root / "dev.src", root / "dev.trg")
    spm = root / "joint.model"
    train_subword_model(
        [files["en"], files["de"], files["xx"]], spm, SubwordConfig(vocab_size=120), symbols=["<2de>", "<2xx>"]
    )
    model_dir = root / "model"
    data = ([str(root / "en-de.en"), str(root / "en-xx.en")], [str(root / "en-de.de"), str(root / "en-xx.xx")])
    files_ = TrainFiles(data, str(root / "dev.src"), str(root / "dev.trg"), str(spm), str(spm), str(model_dir))
    from nmt.model_config import ModelMeta

    meta = ModelMeta("en", "", directions=["en-de", "en-xx"])
    train(TOY_MODEL, tiny_train_config(max_steps=300, valid_every=150, temperature=5), files_, meta=meta)
    return model_dir, dev


def test_a_multilingual_model_translates_into_the_language_of_the_tag(one_to_many, tmp_path):
    model_dir, dev = one_to_many
    meta = json.loads((model_dir / META_FILE).read_text())
    assert meta["multilingual"]["tags"] == {"de": "<2de>", "xx": "<2xx>"} and meta["src_lang"] == "en"
    assert meta["source_normalization"]["langs"] == ["en"] and meta["trg_lang"] is None
    assert load_subword(model_dir / "src.model").piece_to_id("<2xx>") != load_subword(model_dir / "src.model").unk_id()
    hyps = {}
    for lang in ("de", "xx"):
        translate_file(model_dir, dev["en"], tmp_path / f"hyp.{lang}", DecodeConfig(method="greedy"), trg_lang=lang)
        hyps[lang] = (tmp_path / f"hyp.{lang}").read_text().split()
    # Each tag asks for its own language: the words of its lexicon, hardly any of the other's.
    for lang, lexicon, other in (("de", LEXICON, REVERSED), ("xx", REVERSED, LEXICON)):
        own = sum(word in lexicon.values() for word in hyps[lang])
        assert own > 0.8 * len(hyps[lang]) and sum(word in other.values() for word in hyps[lang]) < own / 4
    rows = score_directions(
        model_dir,
        ["en-de", "en-xx"],
        [dev["en"], dev["en"]],
        [dev["de"], dev["xx"]],
        tiny_train_config(),
        tmp_path / "directions.json",
        tmp_path / "directions.md",
    )
    assert [row["direction"] for row in rows] == ["en-de", "en-xx"] and all(row["bleu"] > 10 for row in rows), rows
    assert "| en-xx | trained |" in (tmp_path / "directions.md").read_text()


def test_translation_needs_a_tag_the_model_has(one_to_many, tmp_path):
    model_dir, dev = one_to_many
    with pytest.raises(ConfigError, match=r"target languages and tags: de <2de>, xx <2xx>\): give the target language"):
        list(tag_input(model_dir, ["a man"]))
    with pytest.raises(ConfigError, match="no tag for 'fr'"):
        translate_file(model_dir, dev["en"], tmp_path / "hyp", DecodeConfig(method="greedy"), trg_lang="fr")
    assert list(tag_input(model_dir, ["a man", " "], "xx")) == ["<2xx> a man", " "]  # empty lines stay empty


def test_a_model_from_several_languages_needs_the_source_language(tmp_path):
    meta = {"source_normalization": {"lang": None, "langs": ["de", "fr"], "moses_punctuation": True}}
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ConfigError, match="translates from de, fr: give the source language"):
        normalize_input(tmp_path, ["x"])
    with pytest.raises(ConfigError, match="translates from de, fr: not from 'en'"):
        normalize_input(tmp_path, ["x"], "en")
    assert list(normalize_input(tmp_path, ["Il a dit « oui » ?"], "fr")) == ['Il a dit " oui " ?']


def test_a_multilingual_model_exports_to_ctranslate2_with_its_tags(one_to_many, tmp_path):
    """The tag is a source piece: the export decodes each target language as torch does, token for token."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    from nmt.decoding.ctranslate2 import export_model

    model_dir, dev = one_to_many
    export = export_model(model_dir, tmp_path / "ct2")
    assert json.loads((export / META_FILE).read_text())["multilingual"]["tags"] == {"de": "<2de>", "xx": "<2xx>"}
    for lang in ("de", "xx"):
        for runtime, path in (("torch", model_dir), ("ctranslate2", export)):
            config = DecodeConfig(method="greedy", runtime=runtime)
            translate_file(path, dev["en"], tmp_path / f"{runtime}.{lang}", config, trg_lang=lang)
        assert (tmp_path / f"torch.{lang}").read_text() == (tmp_path / f"ctranslate2.{lang}").read_text()
