# Config validation, get_* helpers for params and inputs, wildcard constraints.

import dataclasses
import os
import sys

import jsonschema
import yaml
from jsonschema.exceptions import best_match
from snakemake.utils import update_config, validate

from nmt.atomic import remove_stale_temp_files
from nmt.download import MIRROR_ENV
from nmt.config import (
    CleanConfig,
    CorpusConfig,
    DecodeConfig,
    ModelMeta,
    SubwordConfig,
    SyntheticConfig,
    TablesConfig,
    TrainConfig,
    from_dict,
)
from nmt.errors import ConfigError
from nmt.model_config import resolve_model_options


def read_overrides(value, schema, key):
    """``--config`` values as the config file would give them: Snakemake reads nested values with YAML's
    BaseLoader, as strings ('seeds=[1, 2]' gives ['1', '2']), so read each string with yaml.safe_load,
    except where the schema wants a string. Exit with one line on a value that is not YAML."""
    if isinstance(value, dict):
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else {}
        props = schema.get("properties", {})
        return {k: read_overrides(v, props.get(k, extra), f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [read_overrides(v, schema.get("items", {}), f"{key}.{i}") for i, v in enumerate(value)]
    types = schema.get("type", [])
    if not isinstance(value, str) or "string" in types or all(isinstance(v, str) for v in schema.get("enum", [0])):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as e:
        sys.exit(f"config error: key '{key}': --config value {value!r} is not YAML ({getattr(e, 'problem', e)})")


def check_config(config, schema_path):
    """Exit with one line naming the first bad key, before Snakemake's validate() fills in defaults.

    sys.exit rather than an exception: Snakemake would add its own location lines around the message.
    """
    with open(schema_path) as f:
        schema = yaml.safe_load(f)
    for key, value in workflow.config_settings.config.items():
        update_config(config, {key: read_overrides(value, schema["properties"].get(key, {}), key)})
    error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is not None:
        key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        sys.exit(f"config error: key '{key}': {error.message}")
    # The seed of each training run is the {run} of its results path, from the top-level seeds list.
    sections = {"training": config.get("training")}
    sections |= {f"models.{name}.training": m.get("training") for name, m in config.get("models", {}).items()}
    for where, section in sections.items():
        if isinstance(section, dict) and "seed" in section:
            sys.exit(f"config error: key '{where}.seed': set the top-level list 'seeds' instead (e.g. seeds: [1, 2, 3])")


def check_data(config):
    """Raise ConfigError on a data section that names undefined corpora, trains on a dev/test set, or a pair
    whose languages a corpus cannot provide."""
    eval_sets = [config["data"]["dev"], *config["data"]["test"]]
    for role in ("train", "dev", "test", "mono"):
        names = config["data"][role]
        for name in [names] if isinstance(names, str) else names:
            if name not in config["corpora"]:
                raise ConfigError(f"data.{role}: corpus '{name}' is not defined under corpora")
            if role in ("train", "mono") and name in eval_sets:
                raise ConfigError(f"data.{role}: corpus '{name}' is also a dev/test set (data.dev, data.test)")
    for pair in config["pairs"]:
        src, trg = pair.split("-")
        if src == trg:
            raise ConfigError(f"pairs: '{pair}' translates a language into itself")
        needs = [(name, lang) for name in config["data"]["train"] + eval_sets for lang in (src, trg)]
        for name, lang in needs + [(name, trg) for name in config["data"]["mono"]]:
            columns = config["corpora"][name].get("tsv_columns")
            if columns and lang not in columns:
                raise ConfigError(f"corpora.{name}.tsv_columns: no column for '{lang}' (needed by pair {pair})")


def defined(key, name, names):
    """``name`` if it is one of ``names``; otherwise exit with one line: a requested path names a ``key`` entry
    (model, pair, corpus) that the config does not define."""
    if name not in names:
        sys.exit(f"error: '{name}' is not defined under {key} in the config (defined: {', '.join(names)})")
    return name


check_config(config, workflow.source_path("../schemas/config.schema.yaml"))
validate(config, "../schemas/config.schema.yaml")

try:
    CORPORA = {name: from_dict(CorpusConfig, spec, f"corpora.{name}") for name, spec in config["corpora"].items()}
    CLEANING = from_dict(CleanConfig, config["cleaning"], "cleaning")
    SUBWORD = from_dict(SubwordConfig, config["subword"], "subword")
    DECODING = from_dict(DecodeConfig, config["decoding"], "decoding")
    # Each model trains with the shared training section, updated by its own `training:` keys.
    TRAINING = {
        name: from_dict(TrainConfig, {**config["training"], **options.get("training", {})}, f"models.{name}.training")
        for name, options in config["models"].items()
    }
    MODEL_OPTIONS = {name: {k: v for k, v in options.items() if k != "training"} for name, options in config["models"].items()}
    for name, options in MODEL_OPTIONS.items():
        resolve_model_options(options, f"models.{name}")
    check_data(config)
    # Back-translation: the reverse model, and per variant its generation search and corpus building.
    BT = config["backtranslation"]
    for name in BT["models"]:
        if name not in config["models"]:
            raise ConfigError(f"backtranslation.models: '{name}' is not a key of models")
    if BT["models"] and not config["data"]["mono"]:
        raise ConfigError("backtranslation.models: back-translation needs monolingual corpora in data.mono")
    REVERSE_OPTIONS = {k: v for k, v in BT["reverse_model"].items() if k != "training"}
    resolve_model_options(REVERSE_OPTIONS, "backtranslation.reverse_model")
    REVERSE_TRAINING = from_dict(
        TrainConfig, {**config["training"], **BT["reverse_model"].get("training", {})}, "backtranslation.reverse_model.training"
    )
    GENERATION = {
        name: from_dict(DecodeConfig, variant.get("generation"), f"backtranslation.variants.{name}.generation")
        for name, variant in BT["variants"].items()
    }
    SYNTHETIC = {
        name: from_dict(SyntheticConfig, {k: v for k, v in variant.items() if k != "generation"}, f"backtranslation.variants.{name}")
        for name, variant in BT["variants"].items()
    }
    TABLES = from_dict(TablesConfig, config["tables"], "tables")
    if TABLES.baseline is not None and TABLES.baseline not in config["models"]:
        raise ConfigError(f"tables.baseline: '{TABLES.baseline}' is not a key of models")
except ConfigError as e:
    sys.exit(f"config error: {e}")

MODELS = list(config["models"])
VARIANTS = list(BT["variants"])
SEEDS = config["seeds"]
# The runs of a system: one per seed, and the ensemble of all seeds' models when there are several.
RUNS = [f"seed{seed}" for seed in SEEDS] + (["ensemble"] if len(SEEDS) > 1 else [])
BASELINE = TABLES.baseline or MODELS[0]
LANGS = sorted({lang for pair in config["pairs"] for lang in pair.split("-")})

# The mirror reaches the download jobs through the environment rather than a param, so switching
# between a mirror and the internet does not make Snakemake redo the downloads and all that follows.
if config["mirror"]:
    os.environ[MIRROR_ENV] = os.path.abspath(config["mirror"])


# Built from the config, so a path of an undefined language, stage, variant, seed or run has no rule
# (models, pairs and corpora are checked by the get_* helpers, with a message naming the defined ones).
wildcard_constraints:
    src="|".join(LANGS),
    trg="|".join(LANGS),
    lang="|".join(LANGS),
    corpus="[A-Za-z0-9][A-Za-z0-9_.-]*",
    model="[A-Za-z0-9_]+",
    stage="|".join(["baseline", *VARIANTS]),
    seed="|".join(map(str, SEEDS)),
    run="|".join(RUNS),
    variant="|".join(VARIANTS),
    part="[0-9]+",


def per_attempt(base):
    """Resource function for ``mem_mb`` (MB) and ``runtime`` (minutes): ``base`` on the first attempt,
    twice it on the second, ... so a job that --retries resubmits after running out of memory or time
    gets more (a training job also resumes from its last checkpoint)."""
    return lambda wildcards, attempt: base * attempt


def get_corpus(wildcards):
    return CORPORA[defined("corpora", wildcards.corpus, list(CORPORA))]


def get_corpus_sources(wildcards):
    """The user's files (URL or path as configured) of a corpus's source and target, named in cleaning errors."""
    corpus = get_corpus(wildcards)
    return (corpus.source(wildcards.src), corpus.source(wildcards.trg))


def get_mono_sources(wildcards):
    return [CORPORA[name].source(wildcards.trg) for name in config["data"]["mono"]]


def get_archive(wildcards):
    """The archive (zip, tar, TSV, OPUS zip) a corpus side is extracted from; none for per-language files."""
    return ["results/data/archive/{corpus}"] if get_corpus(wildcards).archived else []


def get_corpus_files(role, side):
    """Input function: prepared files of ``data.train`` (cleaned, a list) or ``data.dev`` (one file).

    The training data of a back-translation stage is that variant's mixture of real and synthetic pairs.

    :param role: "train" or "dev"
    :param side: "src" or "trg"
    """

    def inputs(wildcards):
        defined("pairs", f"{wildcards.src}-{wildcards.trg}", config["pairs"])
        stage = getattr(wildcards, "stage", "baseline")
        if role == "train" and stage != "baseline":
            lang = getattr(wildcards, side)
            return [f"results/{wildcards.src}-{wildcards.trg}/backtranslation/{stage}/train.{lang}"]
        files = expand(
            "results/{src}-{trg}/data/{folder}/{corpus}.{lang}",
            src=wildcards.src,
            trg=wildcards.trg,
            folder="clean" if role == "train" else "eval",
            corpus=config["data"][role],
            lang=getattr(wildcards, side),
        )
        return files if role == "train" else files[0]

    return inputs


def get_binarize_max_length(wildcards):
    """The largest max_length of the models that train on a stage's data; a model with a smaller one cuts it."""
    models = MODELS if wildcards.stage == "baseline" else BT["models"]
    return max(TRAINING[model].max_length for model in models)


def get_binarize_prefix(wildcards, output):
    """The prefix of a binarized training set: its header (the first of the rule's data files) without .json."""
    return output.data[0].removesuffix(".json")


def get_binarized_prefix(wildcards, input):
    return input.data[0].removesuffix(".json")


def get_model_options(wildcards):
    return MODEL_OPTIONS[defined("models", wildcards.model, MODELS)]


def get_training(wildcards, threads):
    """The training config of one run: its seed, the target language of its dev BLEU, and ``threads: 0``
    resolved to the rule's threads."""
    training = TRAINING[defined("models", wildcards.model, MODELS)]
    return dataclasses.replace(
        training, seed=int(wildcards.seed), trg_lang=wildcards.trg, threads=training.threads or threads
    )


def get_init_model(wildcards):
    """The model a run fine-tunes (``init_from``), so that Snakemake trains it first; none from scratch."""
    init_from = TRAINING[defined("models", wildcards.model, MODELS)].init_from
    return [f"{init_from}/model.pt"] if init_from else []


def get_model_meta(wildcards):
    """What the model directory records for translation: languages, source normalization, BT tagging."""
    tagged = wildcards.stage != "baseline" and SYNTHETIC[wildcards.stage].tagged
    return ModelMeta(wildcards.src, wildcards.trg, CLEANING.normalize_punctuation, tagged)


def get_reverse_meta(wildcards):
    """The reverse (target-to-source) model translates the cleaned target-language monolingual text."""
    return ModelMeta(wildcards.trg, wildcards.src, CLEANING.normalize_punctuation)


def get_reverse_training(wildcards, threads):
    """The reverse model translates into the source language."""
    return dataclasses.replace(REVERSE_TRAINING, trg_lang=wildcards.src, threads=REVERSE_TRAINING.threads or threads)


def get_generation(wildcards):
    """The reverse model's search for one part; each part samples with its own seed."""
    generation = GENERATION[wildcards.variant]
    return dataclasses.replace(generation, seed=generation.seed + int(wildcards.part))


def get_bt_parts(wildcards):
    """Input function (after the split checkpoint): the monolingual parts and their back-translations."""
    parts_dir = checkpoints.split_monolingual.get(src=wildcards.src, trg=wildcards.trg).output.parts
    parts = sorted(glob_wildcards(f"{parts_dir}/{{part}}.{wildcards.trg}").part)
    folder = f"results/{wildcards.src}-{wildcards.trg}/backtranslation"
    return {
        "bt_trg": [f"{parts_dir}/{part}.{wildcards.trg}" for part in parts],
        "bt_src": [f"{folder}/{wildcards.variant}/parts/{part}.{wildcards.src}" for part in parts],
    }


def get_eval_refs(wildcards):
    """Target sides of the dev and test sets, which the monolingual data must not contain."""
    return expand(
        "results/{src}-{trg}/data/eval/{corpus}.{trg}",
        src=wildcards.src,
        trg=wildcards.trg,
        corpus=[config["data"]["dev"], *config["data"]["test"]],
    )


def get_eval_files(wildcards):
    """Both sides of the dev and test sets, which the training data must not contain (decontamination)."""
    defined("pairs", f"{wildcards.src}-{wildcards.trg}", config["pairs"])
    return expand(
        "results/{src}-{trg}/data/eval/{corpus}.{lang}",
        src=wildcards.src,
        trg=wildcards.trg,
        corpus=[config["data"]["dev"], *config["data"]["test"]],
        lang=[wildcards.src, wildcards.trg],
    )


def get_systems():
    """(model, stage) of every system: each model on the parallel data, and the BT models per variant."""
    return [(model, "baseline") for model in MODELS] + [(model, variant) for model in BT["models"] for variant in VARIANTS]


def get_score_files():
    return [
        f"results/{pair}/{model}/{stage}/{run}/scores/{test}.json"
        for pair in config["pairs"]
        for model, stage in get_systems()
        for run in RUNS
        for test in config["data"]["test"]
    ]


def get_significance_files():
    return [f"results/{pair}/significance/{test}.json" for pair in config["pairs"] for test in config["data"]["test"]]


def get_run_models(wildcards):
    """The model(s) a run translates with: its seed's model, or every seed's for the ensemble."""
    seeds = SEEDS if wildcards.run == "ensemble" else [wildcards.run.removeprefix("seed")]
    return [f"results/{wildcards.src}-{wildcards.trg}/{wildcards.model}/{wildcards.stage}/seed{seed}/model/model.pt" for seed in seeds]


def get_run_summaries(wildcards):
    return [model.replace("model.pt", "summary.json") for model in get_run_models(wildcards)]


def get_bootstrap_hyps(wildcards):
    """Every run's translation of one test set, the baseline's first seed first (the system compared with).

    The baseline's other seeds are left out: its row of the table is the reference, not a tested system.
    """
    pair = f"{wildcards.src}-{wildcards.trg}"
    baseline = f"results/{pair}/{BASELINE}/baseline/seed{SEEDS[0]}/translations/{wildcards.test}.{wildcards.trg}"
    hyps = [
        f"results/{pair}/{model}/{stage}/{run}/translations/{wildcards.test}.{wildcards.trg}"
        for model, stage in get_systems()
        for run in RUNS
        if (model, stage) != (BASELINE, "baseline") or run == "ensemble"
    ]
    return [baseline] + hyps


def get_curve_models(wildcards):
    """The first seed's model summary of every system of a pair, for the comparison plot."""
    return [
        f"results/{wildcards.src}-{wildcards.trg}/{model}/{stage}/seed{SEEDS[0]}/model/summary.json"
        for model, stage in get_systems()
    ]


def get_plot_files():
    """The comparison figure of each pair, and the learning curves of every seed of every system."""
    return [f"results/plots/{pair}.comparison.png" for pair in config["pairs"]] + [
        f"results/plots/{pair}.{model}.{stage}.seed{seed}.png"
        for pair in config["pairs"]
        for model, stage in get_systems()
        for seed in SEEDS
    ]


def describe_data(stage):
    """The data column of the result table: ``parallel``, or e.g. ``parallel+bt (sample-top10, tagged)``."""
    if stage == "baseline":
        return "parallel"
    details = [GENERATION[stage].describe()]
    if SYNTHETIC[stage].tagged:
        details.append("tagged")
    if SYNTHETIC[stage].upsample_real > 1:
        details.append(f"real x{SYNTHETIC[stage].upsample_real}")
    return f"parallel+bt ({', '.join(details)})"


def get_system(wildcards, input):
    """What identifies a row of the result table (and its translation, which significance tests refer to)."""
    options = config["models"][wildcards.model]
    system = {
        "pair": f"{wildcards.src}-{wildcards.trg}",
        "testset": wildcards.test,
        "model": wildcards.model,
        "arch": options["arch"],
        "preset": options.get("preset", ""),
        "stage": wildcards.stage,
        "data": describe_data(wildcards.stage),
        "seed": "ensemble" if wildcards.run == "ensemble" else int(wildcards.run.removeprefix("seed")),
        "hyp": input.hyp,
        "ref": input.ref,
    }
    if wildcards.run == "ensemble":
        system["members"] = len(SEEDS)
    return system

