"""nmt.experiment: the experiment a workflow config describes (its systems, runs and each rule's settings), built
from the tiny end-to-end config without running Snakemake."""

import copy

import pytest
import yaml
from conftest import REPO
from snakemake.utils import validate  # the schema call of workflow/rules/common.smk: it fills in the defaults

from nmt.config import DecodeConfig
from nmt.config_file import load_experiment
from nmt.errors import ConfigError
from nmt.experiment import Run, System
from nmt.model_config import ModelMeta
from nmt.models.seq2seq import build_model
from nmt.runtime import choose_runtime

TINY = yaml.safe_load((REPO / "tests/integration/config.yaml").read_text())
SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())


def experiment_of(**sections):
    """The tiny end-to-end config with whole sections replaced, validated by the schema like the workflow's."""
    config = copy.deepcopy(TINY) | copy.deepcopy(sections)
    validate(config, str(SCHEMA_PATH))
    return load_experiment(config)


def test_tiny_config_systems_and_runs():
    experiment = experiment_of()
    assert experiment.langs == ["de", "en"] and experiment.pairs == ("en-de",)
    assert experiment.stages == ["baseline", "bt_beam", "bt_sample_tagged", "distilled"]
    assert experiment.runs == ["seed1", "seed2", "ensemble"]
    assert experiment.baseline == "transformer"  # no tables.baseline: the first model
    assert experiment.systems == [
        System("transformer", "baseline"),
        System("rnn", "baseline"),
        System("convs2s", "baseline"),
        System("student", "baseline"),
        System("transformer", "bt_beam"),
        System("transformer", "bt_sample_tagged"),
        System("student", "distilled"),
    ]
    assert len(experiment.scored_runs()) == 7 * 3
    assert experiment.run_seeds("ensemble") == [1, 2] and experiment.run_seeds("seed2") == [2]
    # The paired bootstrap: the baseline's first seed first, its other seed left out, its ensemble tested.
    compared = experiment.compared_runs()
    assert compared[0] == Run("transformer", "baseline", "seed1") and len(compared) == 1 + 1 + 6 * 3
    assert Run("transformer", "baseline", "seed2") not in compared
    assert Run("transformer", "baseline", "ensemble") in compared
    # The data column of the result table (as the end-to-end test finds it in scores.csv).
    assert [experiment.describe_data(stage) for stage in experiment.stages] == [
        "parallel",
        "parallel+bt (beam2, 2 iterations)",
        "parallel+bt (sample-top5, tagged, 2 iterations)",
        "distilled (transformer tiny, beam2)",
    ]


def test_distillation_teacher_students_and_their_search():
    experiment = experiment_of()
    # The students translate with their own search in every stage; the teacher's translations of the test sets
    # are the decoding section's, its translations of the training source the generation's.
    assert experiment.test_decoding("student").method == "greedy"
    assert experiment.test_decoding("transformer").beam_size == 3
    assert experiment.distillation.generation.beam_size == 2
    assert experiment.distillation.export_decoding.runtime == "ctranslate2"
    # Distilled targets only (upsample_real 0) unless with_real; the students' data are never tagged.
    assert experiment.distillation.synthetic.upsample_real == 0
    assert not experiment.model_meta("en", "de", "distilled").tagged_bt
    assert experiment.train_max_length("distilled") == experiment.models["student"].training.max_length
    mixed = experiment_of(distillation={**TINY["distillation"], "with_real": True})
    assert mixed.distillation.synthetic.upsample_real == 1
    assert mixed.describe_data("distilled") == "distilled (transformer tiny, beam2, + parallel)"
    # The rows of the distillation table: the teacher's ensemble, each student's first seed in torch and exported.
    assert [(d.role, d.model, d.stage, d.run, d.quantization) for d in experiment.distillation_rows()] == [
        ("teacher", "transformer", "baseline", "ensemble", None),
        ("student", "student", "baseline", "seed1", None),
        ("student", "student", "distilled", "seed1", None),
        ("student", "student", "distilled", "seed1", "int8"),
    ]
    assert experiment_of(distillation={}).distillation is None
    assert "distilled" not in experiment_of(distillation={}).stages


def test_tables_baseline_and_a_single_seed():
    experiment = experiment_of(seeds=[7], tables={"baseline": "rnn"})
    assert experiment.runs == ["seed7"] and experiment.baseline == "rnn"
    assert experiment.compared_runs()[:2] == [Run("rnn", "baseline", "seed7"), Run("transformer", "baseline", "seed7")]


def test_models_with_their_training():
    models = {
        "t": {"arch": "transformer", "size": "tiny", "d_model": 32, "training": {"max_length": 64, "lr": 0.01}},
        "r": {"arch": "rnn", "size": "tiny", "training": {"threads": 3, "init_from": "old/model"}},
    }
    unset = {**TINY["training"], "threads": 0}  # the default: the job's threads
    experiment = experiment_of(models=models, backtranslation={"models": ["t"]}, distillation={}, training=unset)
    t, r = experiment.models["t"], experiment.models["r"]
    assert t.arch == "transformer" and t.config.d_model == 32 and t.config.n_heads == 2  # the preset, overridden
    assert t.options == {"arch": "transformer", "size": "tiny", "d_model": 32}  # what training builds it from
    assert t.training.lr == 0.01 and t.training.max_steps == 40  # its own key, and the shared training section
    assert r.training.lr == 0.002 and r.size == "tiny"
    assert t.size == "tiny, d_model 32"  # the tables' label says what was changed beside the named size
    settings = experiment.model_settings("t")  # every setting resolved: a changed size default reruns training
    assert settings["arch"] == "transformer" and (settings["d_model"], settings["n_heads"]) == (32, 2)
    assert build_model(settings, 50, 50, True).spec == build_model(t.options, 50, 50, True).spec
    # One run: its seed and dev BLEU language; threads 0 (the default) is the job's, a set value stays.
    run = experiment.training("t", 2, "de").on_threads(8)
    assert (run.seed, run.trg_lang, run.threads, run.lr) == (2, "de", 8, 0.01)
    assert experiment.training("t", 2, "de").threads == 0  # what the rule records: not the job's --cores
    assert experiment.training("r", 1, "de").on_threads(8).threads == 3
    assert experiment.init_files("r") == ["old/model/model.pt"] and experiment.init_files("t") == []
    # Binarized once per stage, at the longest max_length of the models training on it.
    assert experiment.train_max_length("baseline") == 128 and experiment.train_max_length("bt_beam") == 64


def test_backtranslation_settings():
    experiment = experiment_of(training={**TINY["training"], "threads": 0})  # the reverse model takes the job's
    bt = experiment.backtranslation
    assert bt.models == ("transformer",) and (bt.max_sentences, bt.chunk_lines, bt.seed) == (300, 100, 1)
    assert bt.sentence_form and not experiment_of(backtranslation={"models": []}).backtranslation.sentence_form
    assert bt.reverse.arch == "transformer" and bt.reverse.options == {"arch": "transformer", "size": "tiny"}
    reverse = experiment.reverse_training("en").on_threads(4)
    assert (reverse.trg_lang, reverse.threads) == ("en", 4)
    # Each part of the monolingual text samples with its own seed.
    assert [experiment.generation("bt_sample_tagged", part).seed for part in ("0000", "0002")] == [1, 3]
    assert experiment.generation("bt_beam", "0001").beam_size == 2
    assert experiment.synthetic("bt_sample_tagged").tagged
    assert experiment.model_meta("en", "de", "bt_sample_tagged") == ModelMeta("en", "de", True, tagged_bt=True)
    assert experiment.model_meta("en", "de", "bt_beam") == ModelMeta("en", "de", True, tagged_bt=False)
    assert experiment.reverse_meta("en", "de") == ModelMeta("de", "en", True, tagged_bt=False)
    assert experiment.mono_sources("de") == [
        "https://raw.githubusercontent.com/multi30k/dataset/master/data/task2/raw/train.1.de.gz"
    ]


def test_iterative_backtranslation_rounds():
    """Rounds 2..N train with the reverse model's settings on the variant's data (weights, tag) in either direction;
    one round (the default), or no back-translation models, has no later round."""
    assert (
        experiment_of(backtranslation={**TINY["backtranslation"], "iterations": 1}).backtranslation.later_rounds == []
    )
    assert (
        experiment_of(
            backtranslation={**TINY["backtranslation"], "models": [], "iterations": 3}
        ).backtranslation.later_rounds
        == []
    )
    variants = copy.deepcopy(TINY["backtranslation"]["variants"])
    variants["bt_sample_tagged"]["upsample_real"] = 2
    experiment = experiment_of(
        models={"transformer": TINY["models"]["rnn"]},  # no training stages: the variants' weights apply
        backtranslation={**TINY["backtranslation"], "iterations": 3, "variants": variants},
        distillation={"students": []},
    )
    assert experiment.backtranslation.later_rounds == [2, 3]
    forward, reverse = (experiment.reverse_training(lang, "bt_sample_tagged") for lang in ("de", "en"))
    assert (forward.trg_lang, reverse.trg_lang) == ("de", "en")
    # The real pairs upsampled as the variant says, beside the synthetic corpus; the reverse model's training keys.
    assert forward.corpus_weights == reverse.corpus_weights == {"multi30k_train": 2, "synthetic": 1}
    assert forward.max_steps == experiment.reverse_training("en").max_steps
    assert experiment.reverse_training("de", "bt_beam").corpus_weights is None
    assert experiment.round_meta("de", "en", "bt_sample_tagged") == ModelMeta("de", "en", True, tagged_bt=True)
    assert experiment.round_meta("en", "de", "bt_beam") == ModelMeta("en", "de", True, tagged_bt=False)
    assert experiment.describe_data("bt_sample_tagged") == "parallel+bt (sample-top5, tagged, real x2, 3 iterations)"


def test_system_row():
    experiment = experiment_of()
    row = experiment.system_row("en-de", "test", Run("transformer", "bt_beam", "seed2"), "hyp.de", "ref.de")
    assert row == {
        "pair": "en-de",
        "testset": "test",
        "model": "transformer",
        "arch": "transformer",
        "size": "tiny",
        "stage": "bt_beam",
        "data": "parallel+bt (beam2, 2 iterations)",
        "seed": 2,
        "hyp": "hyp.de",
        "ref": "ref.de",
    }
    ensemble = experiment.system_row("en-de", "test", Run("rnn", "baseline", "ensemble"), "h", "r")
    assert (ensemble["seed"], ensemble["members"], ensemble["data"]) == ("ensemble", 2, "parallel")


DATA = {"train": ["multi30k_train"], "dev": "multi30k_val", "test": ["test_2016_flickr"], "mono": ["multi30k_mono1"]}
TRAIN = TINY["corpora"]["multi30k_train"]
TWO_CORPORA = {
    "data": {**DATA, "train": ["multi30k_train", "flickr_extra"]},
    "corpora": {
        **TINY["corpora"],
        "multi30k_train": {**TRAIN, "cleaning": {"langid": False, "max_ratio": 2}, "weight": 0.5},
        "flickr_extra": {"url": "https://example.org/extra.{lang}.gz", "weight": 3},
    },
}


def test_corpora_with_their_own_cleaning_and_weights():
    experiment = experiment_of(**TWO_CORPORA, cleaning={"max_pairs": 400, "langid_threshold": 0.8})
    own, other = experiment.corpus_cleaning("multi30k_train"), experiment.corpus_cleaning("flickr_extra")
    assert (own.langid, own.max_ratio, own.max_pairs, own.langid_threshold) == (False, 2.0, 400, 0.8)
    assert (other.langid, other.max_ratio, other.max_pairs) == (True, 3.0, 400)
    assert other == experiment.cleaning, "a corpus without its own keys is cleaned by the section"
    # The weights, by corpus name (training matches them to the binarized corpora): the systems on
    # the parallel data and the reverse model; a back-translation system's real corpora times upsample_real,
    # beside its synthetic corpus drawn once.
    weights = experiment.corpus_weights()
    assert list(weights.values()) == [0.5, 3.0] and list(weights) == list(experiment.data.train)
    assert experiment.training("rnn", 1, "de", "baseline").corpus_weights == weights
    assert experiment.training("rnn", 1, "de").corpus_weights == weights
    assert experiment.corpus_weights("bt_beam") == {**weights, "synthetic": 1}
    assert experiment.reverse_training("en").corpus_weights == weights
    # Fetching depends on neither: the download jobs' params are those of a corpus without them.
    assert experiment.corpora["flickr_extra"].import_settings()["url"] == "https://example.org/extra.{lang}.gz"
    assert "weight" not in experiment.corpora["multi30k_train"].import_settings()


def test_without_weights_training_is_unweighted():
    experiment = experiment_of()
    assert experiment.corpus_weights() is None and experiment.training("rnn", 1, "de").corpus_weights is None
    assert experiment.corpus_weights("bt_beam") is None and experiment.corpus_weights("distilled") is None


def test_upsample_real_is_a_weight_of_the_real_corpora():
    variants = {"bt": {"generation": {"method": "greedy"}, "upsample_real": 2}}
    experiment = experiment_of(
        models={"rnn": TINY["models"]["rnn"]},
        backtranslation={**TINY["backtranslation"], "models": ["rnn"], "variants": variants},
        distillation={"students": []},
    )
    assert experiment.training("rnn", 1, "de", "bt").corpus_weights == {"multi30k_train": 2, "synthetic": 1}


def test_training_stages_resolve_their_data_mix_per_system():
    """real and synthetic become shares per corpus; the baseline trains the same stages on the real share alone;
    a stage without data draws by the corpus weights; every other key of a stage is passed on."""
    experiment = experiment_of()
    stages = experiment.training("transformer", 2, "de", "bt_beam").stages
    assert stages == [
        {"max_steps": 20, "mix": {"multi30k_train": 0.5, "synthetic": 0.5}},
        {"max_steps": 20, "lr": 0.001, "mix": {"multi30k_train": 1.0}},
    ]
    baseline = experiment.training("transformer", 2, "de")
    assert baseline.stages == [{"max_steps": 20, "mix": {"multi30k_train": 0.5}}, stages[1]]
    assert baseline.corpus_weights is None and baseline.seed == 2
    assert experiment.training("rnn", 1, "de").stages is None
    model = {**TINY["models"]["transformer"], "training": {"stages": [{"max_steps": 5}, {"data": {"real": 1}}]}}
    staged = experiment_of(models={**TINY["models"], "transformer": model}).training("transformer", 1, "de", "bt_beam")
    assert staged.stages == [{"max_steps": 5, "corpus_weights": None}, {"mix": {"multi30k_train": 1.0}}]
    assert experiment.corpus_cleaning("multi30k_train") == experiment.cleaning


def test_reverse_model_stages_order_each_rounds_synthetic_pairs():
    """reverse_model's stages (docs/configuration.md's iterations example): a later round's forward and reverse model
    train them with the variant's synthetic corpus; round 1's reverse model, without one, on the real share alone."""
    stages = [{"data": {"real": 0.1, "synthetic": 0.9}, "max_steps": 16}, {"data": {"real": 1}, "max_steps": 24}]
    reverse = {"arch": "transformer", "size": "tiny", "training": {"stages": stages}}
    experiment = experiment_of(backtranslation={**TINY["backtranslation"], "reverse_model": reverse})
    assert experiment.reverse_training("en").stages == [
        {"max_steps": 16, "mix": {"multi30k_train": 0.1}},
        {"max_steps": 24, "mix": {"multi30k_train": 1.0}},
    ]
    for lang in ("de", "en"):  # round 2's forward and reverse model
        assert experiment.reverse_training(lang, "bt_beam").stages == [
            {"max_steps": 16, "mix": {"multi30k_train": 0.1, "synthetic": 0.9}},
            {"max_steps": 24, "mix": {"multi30k_train": 1.0}},
        ]


# runtime auto: which runtime decodes a job.
GREEDY = DecodeConfig(method="greedy", runtime="auto")
SHARED_BEAM = DecodeConfig(runtime="auto", length_normalization="ctranslate2")


@pytest.mark.parametrize(
    ("config", "archs", "installed", "runtime", "why"),
    [
        (GREEDY, ["transformer"], True, "ctranslate2", "one Transformer and greedy, which CTranslate2 runs as torch"),
        (SHARED_BEAM, ["transformer"], True, "ctranslate2", "one Transformer and beam5"),
        (DecodeConfig(runtime="auto"), ["transformer"], True, "torch", "CTranslate2 cannot decode beam search with"),
        (GREEDY, ["transformer"] * 3, True, "torch", "CTranslate2 cannot decode an ensemble (of 3 models)"),
        (GREEDY, ["convs2s"], True, "torch", "CTranslate2 cannot decode a convs2s model"),
        (GREEDY, ["transformer"], False, "torch", "ctranslate2 is not installed"),
        (DecodeConfig(method="greedy"), ["rnn"], True, "torch", "runtime torch"),
    ],
)
def test_auto_chooses_ctranslate2_where_it_runs_the_search(config, archs, installed, runtime, why):
    chosen, reason = choose_runtime(config, archs, installed)
    assert chosen == runtime and reason.startswith(why), reason


def test_runtime_ctranslate2_where_it_cannot_run_the_search_is_one_line_naming_the_key():
    config = DecodeConfig(method="sample", runtime="ctranslate2")
    with pytest.raises(ConfigError, match=r"^backtranslation\.variants\.bt\.generation\.runtime: ctranslate2 cannot"):
        choose_runtime(config, ["rnn"], True, "backtranslation.variants.bt.generation")
    assert choose_runtime(config, ["transformer"], False) == ("ctranslate2", "runtime ctranslate2")
