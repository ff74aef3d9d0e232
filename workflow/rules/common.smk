# Config validation, get_* helpers for params and inputs, wildcard constraints.

import dataclasses
import os
import sys

import jsonschema
import yaml
from jsonschema.exceptions import best_match
from snakemake.utils import validate

from nmt.download import MIRROR_ENV
from nmt.config import CleanConfig, DecodeConfig, SubwordConfig, TrainConfig, from_dict
from nmt.errors import ConfigError
from nmt.model import resolve_model_options


def check_config(config, schema_path):
    """Exit with one line naming the first bad key, before Snakemake's validate() fills in defaults.

    sys.exit rather than an exception: Snakemake would add its own location lines around the message.
    """
    with open(schema_path) as f:
        schema = yaml.safe_load(f)
    error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is not None:
        key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        sys.exit(f"config error: key '{key}': {error.message}")


check_config(config, workflow.source_path("../schemas/config.schema.yaml"))
validate(config, "../schemas/config.schema.yaml")

try:
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
    for role, names in (("train", config["data"]["train"]), ("dev", [config["data"]["dev"]]), ("test", config["data"]["test"])):
        for name in names:
            if name not in config["corpora"]:
                raise ConfigError(f"data.{role}: corpus '{name}' is not defined under corpora")
except ConfigError as e:
    sys.exit(f"config error: {e}")

MODELS = list(config["models"])

# The mirror reaches the download jobs through the environment rather than a param, so switching
# between a mirror and the internet does not make Snakemake redo the downloads and all that follows.
if config["mirror"]:
    os.environ[MIRROR_ENV] = os.path.abspath(config["mirror"])


wildcard_constraints:
    src="[a-z]{2,3}",
    trg="[a-z]{2,3}",
    lang="[a-z]{2,3}",
    corpus="[A-Za-z0-9_.]+",
    model="[A-Za-z0-9_]+",
    stage="baseline",


def get_url(wildcards):
    return config["corpora"][wildcards.corpus]["url"].replace("{lang}", wildcards.lang)


def get_sha256(wildcards):
    return config["corpora"][wildcards.corpus].get("sha256", {}).get(wildcards.lang)


def get_corpus_files(role, side):
    """Input function: prepared files of ``data.train`` (cleaned, a list) or ``data.dev`` (one file).

    :param role: "train" or "dev"
    :param side: "src" or "trg"
    """

    def inputs(wildcards):
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


def get_model_options(wildcards):
    return MODEL_OPTIONS[wildcards.model]


def get_training(wildcards, threads):
    """The training config, with ``threads: 0`` resolved to the rule's threads."""
    training = TRAINING[wildcards.model]
    return dataclasses.replace(training, threads=training.threads or threads)


def get_score_files():
    return expand(
        "results/{pair}/{model}/baseline/scores/{test}.json",
        pair=config["pairs"],
        model=MODELS,
        test=config["data"]["test"],
    )


def get_system(wildcards):
    """What identifies a row of the result table."""
    return {
        "pair": f"{wildcards.src}-{wildcards.trg}",
        "testset": wildcards.test,
        "model": wildcards.model,
        "arch": config["models"][wildcards.model]["arch"],
        "data": {"baseline": "parallel"}[wildcards.stage],
    }

