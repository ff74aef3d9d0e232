"""Reading a workflow config into an :class:`~nmt.experiment.Experiment`: its YAML, the ``--config`` overrides, the
JSON schema, and the checks across keys that the schema cannot make.

Torch-free, since Snakemake parses the workflow on a login node that need not have torch. workflow/rules/common.smk
calls :func:`check_config`, lets Snakemake's ``validate`` fill in the schema's defaults, then :func:`load_experiment`.
"""

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema.exceptions import best_match

from nmt.config import (
    CleanConfig,
    CorpusConfig,
    DecodeConfig,
    SubwordConfig,
    SyntheticConfig,
    TablesConfig,
    TrainConfig,
    check_seed,
    from_dict,
    read_number,
    read_switch,
)
from nmt.errors import ConfigError
from nmt.experiment import (
    BASELINE,
    REAL,
    SYNTHETIC,
    Backtranslation,
    DataRoles,
    Distillation,
    Experiment,
    Model,
    Variant,
)
from nmt.model_config import resolve_model_options
from nmt.multilingual import check_eval_sets, parse_multilingual
from nmt.runtime import choose_runtime, why_not_ctranslate2


def check_config_syntax(path: str | Path) -> None:
    """Raise ConfigError naming the line and column of a YAML syntax error in the config file ``path`` (a tab,
    a bad indent), which Snakemake's own message ("Config file is not valid JSON or YAML") does not name.

    The file is read as Snakemake reads it: as JSON, else as YAML. A missing file is Snakemake's to report.

    :raises ConfigError: ``PATH, line N, column M: what YAML found``
    """
    path = Path(path)
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 (byte {e.start}); save the config file as UTF-8") from None
    try:
        json.loads(text)
        return
    except ValueError:
        pass
    try:
        yaml.load(text, Loader=yaml.FullLoader)  # Snakemake's loader (yte)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        problem = " ".join(str(e.problem or e.context).split())
        hint = " (YAML indents with spaces; replace the tab)" if "'\\t'" in problem else ""
        raise ConfigError(f"{where}: {problem}{hint}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not YAML ({' '.join(str(e).split())})") from None


def check_config(config: dict[str, Any], schema_path: str | Path, overrides: dict[str, Any]) -> None:
    """Raise ConfigError naming the first bad key, before the schema's defaults are filled in: the ``--config``
    ``overrides`` are read as YAML (:func:`read_overrides`) and merged in, then YAML 1.1's misreadings
    (``bf16: on`` as True, ``1e-3`` as a string) read as the schema means them (:func:`read_yaml_habits`).

    :param config: Snakemake's ``config``, updated in place
    :param overrides: Snakemake's ``--config`` settings (``workflow.config_settings.config``)
    """
    with open(schema_path, encoding="utf-8") as f:
        schema = yaml.safe_load(f)
    for key, value in overrides.items():
        merge(config, {key: read_overrides(value, schema["properties"].get(key, {}), key)})
    config.update(read_yaml_habits(config, schema))
    error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is not None:
        raise ConfigError(f"key '{'.'.join(map(str, error.absolute_path)) or '(top level)'}': {error.message}")
    reject_training_seeds(config)


def merge(config: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``config`` updated in place by ``update``, section by section, as Snakemake's ``update_config`` merges."""
    for key, value in update.items():
        if isinstance(value, dict):
            section = config.get(key)
            config[key] = merge(section if isinstance(section, dict) else {}, value)
        else:
            config[key] = value
    return config


def read_overrides(value: Any, schema: dict[str, Any], key: str) -> Any:
    """``--config`` values as the config file would give them.

    Snakemake reads nested values with YAML's BaseLoader, as strings ('seeds=[1, 2]' gives ['1', '2']), so each
    string is read with ``yaml.safe_load``, except where the schema wants a string.

    :param value: a value of Snakemake's ``--config`` settings
    :param schema: the JSON schema of that key
    :param key: the key's config path, named in the error
    :return: the value with its strings read as YAML
    :raises ConfigError: on a string that is not YAML
    """
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
        raise ConfigError(f"key '{key}': --config value {value!r} is not YAML ({getattr(e, 'problem', e)})") from e


def read_yaml_habits(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with what YAML 1.1 (PyYAML, so Snakemake) makes of plain YAML read as the schema means it.

    YAML 1.1 reads ``on``/``off`` (and ``yes``/``no``) as booleans, so ``bf16: on`` gives True: where the schema's
    choices are ``on``/``off``, a boolean becomes ``"on"``/``"off"``. It reads a float without a dot (``1e-3``)
    as a string: where the schema wants a number, a string that writes one becomes that number (an integer where
    it wants one and the number is whole, as ``1e4``). Sections without a schema of their keys (a model's
    ``training``, a variant's ``generation``) are read the same way by :func:`nmt.config.from_dict`.

    :param value: a config value (the whole config with the whole schema)
    :param schema: the JSON schema of that value
    :return: the value, read again where YAML 1.1 misread it; anything else as it was, for the schema to check
    """
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else {}
        return {k: read_yaml_habits(v, props.get(k, extra)) for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [read_yaml_habits(v, items if isinstance(items, dict) else {}) for v in value]
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if "string" not in types and {"number", "integer"} & set(types):
        return read_number(value, integer="number" not in types)
    return read_switch(value, schema.get("enum", []))


def reject_training_seeds(config: dict[str, Any]) -> None:
    """Raise ConfigError on a ``seed`` in a training section: the seed of each run is the ``{run}`` of its results
    path, from the top-level ``seeds`` list. Checked before the schema fills in the default ``training.seed``."""
    sections = {"training": config.get("training")}
    for key in ("models", "multilingual"):
        entries = config.get(key) or {}
        sections |= {f"{key}.{name}.training": m.get("training") for name, m in entries.items() if isinstance(m, dict)}
    for where, section in sections.items():
        if isinstance(section, dict) and "seed" in section:
            raise ConfigError(f"key '{where}.seed': set the top-level list 'seeds' instead (e.g. seeds: [1, 2, 3])")


def load_experiment(config: dict[str, Any]) -> Experiment:
    """Build the experiment from a config that its JSON schema validated and filled with defaults.

    :param config: the workflow config (Snakemake's ``config`` after ``validate``)
    :return: the experiment
    :raises ConfigError: one line naming the key, on a value nmt rejects or a name that refers to nothing
    """
    for seed in config["seeds"]:
        check_seed("seeds", seed)
    corpora = {name: from_dict(CorpusConfig, spec, f"corpora.{name}") for name, spec in config["corpora"].items()}
    cleaning = from_dict(CleanConfig, config["cleaning"], "cleaning")
    subword = from_dict(SubwordConfig, config["subword"], "subword")
    decoding = from_dict(DecodeConfig, config["decoding"], "decoding")
    if config["training"].get("corpus_weights") is not None:
        raise ConfigError("training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)")
    if config["training"].get("temperature") is not None:
        raise ConfigError("training.temperature: set a multilingual system's temperature (multilingual.NAME)")
    models = {
        name: parse_model(name, options, config["training"], f"models.{name}")
        for name, options in config["models"].items()
    }
    data = DataRoles(
        tuple(config["data"]["train"]),
        config["data"]["dev"],
        tuple(config["data"]["test"]),
        tuple(config["data"]["mono"]),
    )
    check_data(data, corpora, config["pairs"])
    for name in set(data.train) & {REAL, SYNTHETIC}:
        raise ConfigError(f"data.train: '{name}' names the data of training stages; give the corpus another name")
    for name, model in models.items():
        check_stages(model, data, f"models.{name}")
        if model.options.get("share_embeddings") and not subword.joint:
            raise ConfigError(
                f"models.{name}.share_embeddings: one embedding for both languages needs one subword model for both "
                "(subword.joint: true)"
            )
    backtranslation = parse_backtranslation(config["backtranslation"], config["training"], models, data)
    check_source_mono(backtranslation, data, corpora, config["pairs"])
    check_stages(backtranslation.reverse, data, "backtranslation.reverse_model")
    check_upsampling(backtranslation, models)
    distillation = parse_distillation(config["distillation"], models, backtranslation)
    multilingual = parse_multilingual(config, models, config["pairs"], subword)
    check_eval_sets(multilingual, data, corpora, config["pairs"])
    tables = from_dict(TablesConfig, config["tables"], "tables")
    if tables.baseline is not None and tables.baseline not in models:
        raise ConfigError(f"tables.baseline: '{tables.baseline}' is not a key of models")
    experiment = Experiment(
        pairs=tuple(config["pairs"]),
        corpora=corpora,
        data=data,
        cleaning=cleaning,
        subword=subword,
        models=models,
        backtranslation=backtranslation,
        distillation=distillation,
        decoding=decoding,
        seeds=tuple(config["seeds"]),
        tables=tables,
        multilingual=multilingual,
    )
    for name in data.train:
        experiment.corpus_cleaning(name)  # a bad value of a corpus's own cleaning keys fails now
    for where, search, archs in experiment.decoding_jobs():
        choose_runtime(search, archs, installed=True, where=where)  # runtime ctranslate2 where CTranslate2 cannot
    return experiment


def parse_model(name: str, options: dict[str, Any], training: dict[str, Any], where: str) -> Model:
    """A model entry (``arch``, ``size``, architecture keys, ``training``): each model trains with the shared
    ``training`` section, updated by its own ``training:`` keys.

    :param where: the config path of the entry, named in errors, e.g. ``models.transformer``
    """
    own_training = options.get("training", {})
    if isinstance(own_training, dict) and "corpus_weights" in own_training:
        raise ConfigError(f"{where}.training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)")
    merged = {**training, **own_training}
    stages = merged.pop("stages", None) or ()
    train_config = from_dict(TrainConfig, merged, f"{where}.training")
    options = {k: v for k, v in options.items() if k != "training"}
    arch, arch_config = resolve_model_options(options, where, taken=("training",))
    return Model(name, options, arch, arch_config, train_config, tuple(stages))


def check_stages(model: Model, data: DataRoles, where: str) -> None:
    """Raise ConfigError on a training stage whose ``data`` mix names no corpus this experiment trains on (``real``,
    ``synthetic``, or a training corpus), names real data twice, or leaves a baseline system (no synthetic data)
    nothing to draw; and on a stage's training keys that nmt rejects."""
    for i, stage in enumerate(model.stages):
        at = f"{where}.training.stages[{i}]"
        if not isinstance(stage, dict):
            raise ConfigError(f"{at}: must be a mapping of training keys and a data mix, got {stage!r}")
        mix = stage.get("data", {REAL: 1})
        if not isinstance(mix, dict) or not mix:
            raise ConfigError(f"{at}.data: must map corpus names to shares, got {mix!r}")
        for name, share in mix.items():
            if name not in (REAL, SYNTHETIC, *data.train):
                known = ", ".join((REAL, SYNTHETIC, *data.train))
                raise ConfigError(f"{at}.data.{name}: not a training corpus (names: {known})")
            if isinstance(share, bool) or not isinstance(share, (int, float)) or share <= 0:
                raise ConfigError(f"{at}.data.{name}: must be a share > 0, got {share!r}")
        if REAL in mix and set(mix) & set(data.train):
            raise ConfigError(f"{at}.data: names '{REAL}' and a training corpus of it; give one or the other")
        if set(mix) == {SYNTHETIC}:
            raise ConfigError(f"{at}.data: synthetic data only, which the baseline system of '{model.name}' lacks")
    stages = [{k: v for k, v in stage.items() if k != "data"} for stage in model.stages]
    if stages:
        from_dict(TrainConfig, {**dataclasses.asdict(model.training), "stages": stages}, f"{where}.training")


def check_upsampling(backtranslation: Backtranslation, models: dict[str, Model]) -> None:
    """Raise ConfigError on a variant's ``upsample_real`` that no training of it would use: every stage of a model
    it trains sets its own data mix."""
    for name, variant in backtranslation.variants.items():
        if variant.synthetic.upsample_real == 1:
            continue
        for model in backtranslation.models:
            stages = models[model].stages
            if stages and all("data" in stage for stage in stages):
                raise ConfigError(
                    f"backtranslation.variants.{name}.upsample_real: '{model}' trains in stages that each set "
                    "their data mix, so it would not apply; set the real share in the stages' data instead"
                )


def parse_backtranslation(
    section: dict[str, Any], training: dict[str, Any], models: dict[str, Model], data: DataRoles
) -> Backtranslation:
    """The ``backtranslation`` section: its models must be keys of ``models``, and it needs ``data.mono``."""
    for name in section["models"]:
        if name not in models:
            raise ConfigError(f"backtranslation.models: '{name}' is not a key of models")
    if section["models"] and not data.mono:
        raise ConfigError("backtranslation.models: back-translation needs monolingual corpora in data.mono")
    reverse = parse_model("reverse", section["reverse_model"], training, "backtranslation.reverse_model")
    check_seed("backtranslation.seed", section["seed"])
    variants = {}
    for name, variant in section["variants"].items():
        where = f"backtranslation.variants.{name}"
        generation = from_dict(DecodeConfig, variant.get("generation"), f"{where}.generation")
        synthetic = from_dict(SyntheticConfig, {k: v for k, v in variant.items() if k != "generation"}, where)
        variants[name] = Variant(name, generation, synthetic)
    return Backtranslation(
        models=tuple(section["models"]),
        reverse=reverse,
        variants=variants,
        max_sentences=section["max_sentences"],
        chunk_lines=section["chunk_lines"],
        seed=section["seed"],
        iterations=section["iterations"],
        sentence_form=section["sentence_form"],
    )


def check_source_mono(
    backtranslation: Backtranslation, data: DataRoles, corpora: dict[str, CorpusConfig], pairs: list[str]
) -> None:
    """Raise ConfigError when iterative back-translation (``iterations`` >= 2) lacks source-language monolingual
    text: its forward models translate the data.mono corpora's source-language side, so each must have one."""
    if not backtranslation.later_rounds:
        return
    for src in dict.fromkeys(pair.split("-")[0] for pair in pairs):
        for name in data.mono:
            if not corpora[name].provides(src):
                raise ConfigError(
                    f"backtranslation.iterations: {backtranslation.iterations} rounds translate source-language "
                    f"({src}) monolingual text, but corpora.{name} of data.mono has no '{src}' side; give data.mono "
                    "corpora with both languages, or set iterations: 1"
                )


def parse_distillation(
    section: dict[str, Any], models: dict[str, Model], backtranslation: Backtranslation
) -> Distillation | None:
    """The ``distillation`` section (None without students): the teacher must be a system the experiment trains,
    the students keys of ``models``, and with ``ctranslate2`` quantizations each student a Transformer decoded by a
    search CTranslate2 runs."""
    if not section["students"]:
        return None
    teacher, stage = section["teacher"], section["teacher_stage"]
    if teacher not in models:
        raise ConfigError(f"distillation.teacher: '{teacher}' is not a key of models (defined: {', '.join(models)})")
    trained = [BASELINE] + (list(backtranslation.variants) if teacher in backtranslation.models else [])
    if stage not in trained:
        raise ConfigError(
            f"distillation.teacher_stage: '{teacher}' is not trained on stage '{stage}' "
            f"(its stages: {', '.join(trained)}; a back-translation stage needs it in backtranslation.models)"
        )
    decoding = from_dict(DecodeConfig, section["decoding"], "distillation.decoding")
    quantizations = tuple(section["ctranslate2"])
    for student in section["students"]:
        if student not in models:
            defined = ", ".join(models)
            raise ConfigError(f"distillation.students: '{student}' is not a key of models (defined: {defined})")
        if any("data" in stage for stage in models[student].stages):
            raise ConfigError(
                f"distillation.students: '{student}' trains in stages with data mixes, which its distilled corpus "
                "(one file) cannot give; leave data out of its stages"
            )
        if quantizations and models[student].arch != "transformer":
            raise ConfigError(
                f"distillation.students: '{student}' is a {models[student].arch}, which cannot be exported to "
                "CTranslate2 (Transformer only): set distillation.ctranslate2: [] or make the student a transformer"
            )
    why = why_not_ctranslate2(decoding, ["transformer"])
    if quantizations and why:
        raise ConfigError(
            f"distillation.decoding: the CTranslate2 rows cannot decode {why}; set distillation.decoding.method to "
            "greedy (what Kim and Rush's students use), its length_normalization to ctranslate2, or ctranslate2: []"
        )
    synthetic = {"upsample_real": int(section["with_real"]), **section["filters"]}
    return Distillation(
        teacher=teacher,
        teacher_stage=stage,
        students=tuple(section["students"]),
        generation=from_dict(DecodeConfig, section["generation"], "distillation.generation"),
        decoding=decoding,
        synthetic=from_dict(SyntheticConfig, synthetic, "distillation.filters"),
        quantizations=quantizations,
        chunk_lines=section["chunk_lines"],
    )


def check_data(data: DataRoles, corpora: dict[str, CorpusConfig], pairs: list[str]) -> None:
    """Raise ConfigError on a data role that names an undefined corpus, trains on a dev/test set, or a pair whose
    languages a corpus cannot provide (a TSV file without a column for one)."""
    roles = {"train": data.train, "dev": (data.dev,), "test": data.test, "mono": data.mono}
    for role, names in roles.items():
        for name in names:
            if name not in corpora:
                raise ConfigError(f"data.{role}: corpus '{name}' is not defined under corpora")
            if role in ("train", "mono") and name in data.eval_sets:
                raise ConfigError(f"data.{role}: corpus '{name}' is also a dev/test set (data.dev, data.test)")
    for name, corpus in corpora.items():
        if corpus.tokenized_ref and (name in data.train or name in data.mono):
            raise ConfigError(
                f"corpora.{name}.tokenized_ref: '{name}' is training data; test sets are scored against it"
            )
        if name in data.train:
            continue
        # The monolingual corpora are cleaned together, by the cleaning section; dev and test sets are not filtered.
        if corpus.cleaning:
            raise ConfigError(f"corpora.{name}.cleaning: '{name}' is not a training corpus (data.train)")
        if corpus.weight != 1:
            raise ConfigError(f"corpora.{name}.weight: '{name}' is not a training corpus (data.train)")
    for pair in pairs:
        src, trg = pair.split("-")
        if src == trg:
            raise ConfigError(f"pairs: '{pair}' translates a language into itself")
        needs = [(name, lang) for name in data.train + data.eval_sets for lang in (src, trg)]
        for name, lang in needs + [(name, trg) for name in data.mono]:
            columns = corpora[name].tsv_columns
            if columns and lang not in columns:
                raise ConfigError(f"corpora.{name}.tsv_columns: no column for '{lang}' (needed by pair {pair})")
        for name in dict.fromkeys(name for name, _ in needs):
            member = corpora[name].member
            if member is not None and "{lang}" not in member:  # both sides would read it: a source its own reference
                raise ConfigError(
                    f"corpora.{name}.member: '{member}' needs a {{lang}} placeholder: both languages of pair {pair} "
                    "would read the same member"
                )
