"""The experiment a workflow config describes: its data, models, back-translation, decoding and result-table systems.

Snakemake parses the workflow on a login node that need not have torch, so this module imports only the torch-free
config modules. workflow/rules/common.smk validates the config against its JSON schema (which fills in the
defaults), calls :func:`load_experiment`, and answers every param and input function from the :class:`Experiment`.
"""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

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
    read_number,
    read_switch,
)
from nmt.errors import ConfigError
from nmt.model_config import resolve_model_options

# The stage of the models trained on the parallel data only; the other stages are back-translation variants.
BASELINE = "baseline"
# The run of all seeds' models decoding together (when there are two or more seeds).
ENSEMBLE = "ensemble"
# The stage of the students of knowledge distillation, trained on the teacher's translations of the training source.
DISTILLED = "distilled"


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
    sections |= {f"models.{name}.training": m.get("training") for name, m in config.get("models", {}).items()}
    for where, section in sections.items():
        if isinstance(section, dict) and "seed" in section:
            raise ConfigError(f"key '{where}.seed': set the top-level list 'seeds' instead (e.g. seeds: [1, 2, 3])")


@dataclass(frozen=True)
class DataRoles:
    """The corpora (keys of ``corpora``) of each role: training, dev (one), test and monolingual."""

    train: tuple[str, ...]
    dev: str
    test: tuple[str, ...]
    mono: tuple[str, ...]

    @property
    def eval_sets(self) -> tuple[str, ...]:
        """The dev set, then the test sets: never filtered, and kept out of the training and monolingual data."""
        return (self.dev, *self.test)


@dataclass(frozen=True)
class Model:
    """A model of the config: its options as written (``arch``, ``size``, architecture keys, without
    ``training``), which training builds it from, the resolved architecture config, and its training settings."""

    name: str
    options: dict[str, Any]
    arch: str
    config: Any
    training: TrainConfig

    @property
    def size(self) -> str:
        return self.options.get("size", "")

    @property
    def settings(self) -> dict[str, Any]:
        """``arch`` and every architecture setting, its size's defaults resolved: what training builds the
        model from, and what a rule records, so that a changed size or default reruns the training."""
        return {"arch": self.arch, **dataclasses.asdict(self.config)}


@dataclass(frozen=True)
class Variant:
    """A back-translation variant (a ``{stage}``): the reverse model's search, and how the corpus is built."""

    name: str
    generation: DecodeConfig
    synthetic: SyntheticConfig

    def describe(self) -> str:
        """The data column of the result table, e.g. ``parallel+bt (sample-top10, tagged, real x2)``."""
        details = [self.generation.describe()]
        if self.synthetic.tagged:
            details.append("tagged")
        if self.synthetic.upsample_real > 1:
            details.append(f"real x{self.synthetic.upsample_real}")
        return f"parallel+bt ({', '.join(details)})"


@dataclass(frozen=True)
class Backtranslation:
    """The reverse (target-to-source) model, the monolingual sample, and the variants the listed models train on."""

    models: tuple[str, ...]
    reverse: Model
    variants: dict[str, Variant]
    max_sentences: int | None
    chunk_lines: int
    seed: int


@dataclass(frozen=True)
class Distillation:
    """Sequence-level knowledge distillation (Kim and Rush 2016): the teacher system (a model of ``models`` on one
    stage, the ensemble of its seeds when there are several) translates the cleaned training source with
    ``generation``; each student (a model of ``models``) is trained again on the result (stage ``distilled``),
    decoded with ``decoding`` in all its stages, and each CTranslate2 ``quantizations`` export of its first seed's
    distilled model is decoded too, for the deployment table."""

    teacher: str
    teacher_stage: str
    students: tuple[str, ...]
    generation: DecodeConfig
    decoding: DecodeConfig
    synthetic: SyntheticConfig
    quantizations: tuple[str, ...]
    chunk_lines: int

    @property
    def export_decoding(self) -> DecodeConfig:
        """The students' search run by CTranslate2 on their exports."""
        return dataclasses.replace(self.decoding, runtime="ctranslate2")

    def describe(self, teacher_label: str) -> str:
        """The data column of a distilled student, e.g. ``distilled (transformer small, beam5, + parallel)``."""
        mix = ", + parallel" if self.synthetic.upsample_real else ""
        return f"distilled ({teacher_label}, {self.generation.describe()}{mix})"


@dataclass(frozen=True)
class System:
    """Rows of the result table: one model trained on one stage's data (``baseline`` or a variant)."""

    model: str
    stage: str


@dataclass(frozen=True)
class Run:
    """One translation of the test sets: a system with one seed's model (``seed1``), or all seeds' (``ensemble``)."""

    model: str
    stage: str
    name: str


@dataclass(frozen=True)
class Deployed:
    """A row of the distillation table: a run decoded in torch, or (``quantization``) its CTranslate2 export."""

    role: str
    model: str
    stage: str
    run: str
    quantization: str | None = None


@dataclass(frozen=True)
class Experiment:
    """Everything the workflow builds, from a validated config (see :func:`load_experiment`)."""

    pairs: tuple[str, ...]
    corpora: dict[str, CorpusConfig]
    data: DataRoles
    cleaning: CleanConfig
    subword: SubwordConfig
    models: dict[str, Model]
    backtranslation: Backtranslation
    distillation: Distillation | None
    decoding: DecodeConfig
    seeds: tuple[int, ...]
    tables: TablesConfig

    @property
    def langs(self) -> list[str]:
        return sorted({lang for pair in self.pairs for lang in pair.split("-")})

    @property
    def stages(self) -> list[str]:
        return [BASELINE, *self.backtranslation.variants] + ([DISTILLED] if self.distillation else [])

    @property
    def students(self) -> tuple[str, ...]:
        return self.distillation.students if self.distillation else ()

    @property
    def runs(self) -> list[str]:
        """The runs of a system: one per seed, and the ensemble of all seeds' models when there are several."""
        return [f"seed{seed}" for seed in self.seeds] + ([ENSEMBLE] if len(self.seeds) > 1 else [])

    @property
    def baseline(self) -> str:
        """The model whose baseline system the significance tests compare with: ``tables.baseline``, else the first."""
        return self.tables.baseline or next(iter(self.models))

    @property
    def systems(self) -> list[System]:
        """Every model on the parallel data, then each back-translation model per variant, then each student."""
        variants = self.backtranslation.variants
        return (
            [System(model, BASELINE) for model in self.models]
            + [System(model, variant) for model in self.backtranslation.models for variant in variants]
            + [System(model, DISTILLED) for model in self.students]
        )

    def run_seeds(self, run: str) -> list[int]:
        """The seeds whose models a run translates with: its own, or every seed's for the ensemble."""
        return list(self.seeds) if run == ENSEMBLE else [int(run.removeprefix("seed"))]

    def scored_runs(self) -> list[Run]:
        """Every run of every system, in the order of the result table."""
        return [Run(system.model, system.stage, run) for system in self.systems for run in self.runs]

    def compared_runs(self) -> list[Run]:
        """The runs the paired bootstrap tests: the baseline system's first seed (the one compared with) first,
        then every other run. The baseline's other seeds are left out: its row is the reference, not a tested one."""
        reference = Run(self.baseline, BASELINE, self.runs[0])
        others = [
            r for r in self.scored_runs() if (r.model, r.stage) != (self.baseline, BASELINE) or r.name == ENSEMBLE
        ]
        return [reference, *others]

    def model_settings(self, model: str) -> dict[str, Any]:
        """A model's architecture with every setting resolved (:attr:`Model.settings`), which training builds."""
        return self.models[model].settings

    def mono_sources(self, lang: str) -> list[str]:
        """The user's files (URL or path as configured) of the monolingual corpora, named in cleaning errors."""
        return [self.corpora[name].source(lang) for name in self.data.mono]

    def init_files(self, model: str) -> list[str]:
        """The model a model fine-tunes (``training.init_from``), trained first; none when it trains from scratch."""
        init_from = self.models[model].training.init_from
        return [f"{init_from}/model.pt"] if init_from else []

    def training(self, model: str, seed: int, trg_lang: str, stage: str = BASELINE) -> TrainConfig:
        """The training of one run: its seed, the target language of its dev BLEU, and on the parallel data the
        corpus weights (``threads: 0`` stays the job's, :meth:`nmt.config.TrainConfig.on_threads`, so that another
        ``--cores`` reruns nothing)."""
        weights = self.corpus_weights if stage == BASELINE else None
        return dataclasses.replace(self.models[model].training, seed=seed, trg_lang=trg_lang, corpus_weights=weights)

    def reverse_training(self, trg_lang: str) -> TrainConfig:
        """The reverse model's training; it translates into the pair's source language ``trg_lang``, on the parallel
        data reversed (the same corpora, the same weights)."""
        return dataclasses.replace(
            self.backtranslation.reverse.training, trg_lang=trg_lang, corpus_weights=self.corpus_weights
        )

    @property
    def corpus_weights(self) -> dict[str, float] | None:
        """The ``weight`` of each training corpus by name; None when every weight is 1. A back-translation variant's
        corpus is one file (real and synthetic pairs, mixed by ``upsample_real``), so its systems train unweighted."""
        weights = {name: self.corpora[name].weight for name in self.data.train}
        return weights if any(weight != 1 for weight in weights.values()) else None

    def corpus_cleaning(self, corpus: str) -> CleanConfig:
        """The cleaning of one training corpus: the ``cleaning`` section, updated by the corpus's own ``cleaning``."""
        return self.cleaning.updated(self.corpora[corpus].cleaning, f"corpora.{corpus}.cleaning")

    def generation(self, variant: str, part: str) -> DecodeConfig:
        """The reverse model's search for one part of the monolingual text (``part``: its name, a number such as
        ``0003``); each part samples with its own seed."""
        generation = self.backtranslation.variants[variant].generation
        return dataclasses.replace(generation, seed=generation.seed + int(part))

    def test_decoding(self, model: str) -> DecodeConfig:
        """The search that translates a model's test sets: the students' own (in all their stages, so that a student
        on the parallel data and the same student distilled are compared alike), else the decoding section."""
        return self.distillation.decoding if model in self.students else self.decoding

    def teacher_files(self, src: str, trg: str) -> list[str]:
        """The model files of the teacher: one per seed (several decode as an ensemble)."""
        d = self.distillation
        return [f"results/{src}-{trg}/{d.teacher}/{d.teacher_stage}/seed{seed}/model/model.pt" for seed in self.seeds]

    def deployed(self) -> list[Deployed]:
        """The rows of the distillation table: the teacher's run (the ensemble of its seeds when there are several),
        then per student its first seed on the parallel data, distilled, and each CTranslate2 export of that."""
        d, first = self.distillation, f"seed{self.seeds[0]}"
        rows = [Deployed("teacher", d.teacher, d.teacher_stage, self.runs[-1])]
        for student in d.students:
            rows += [Deployed("student", student, BASELINE, first), Deployed("student", student, DISTILLED, first)]
            rows += [Deployed("student", student, DISTILLED, first, q) for q in d.quantizations]
        return rows

    def model_meta(self, src: str, trg: str, stage: str) -> ModelMeta:
        """What a model directory records for translation: languages, source normalization, BT tagging."""
        tagged = stage in self.backtranslation.variants and self.backtranslation.variants[stage].synthetic.tagged
        return ModelMeta(src, trg, self.cleaning.normalize_punctuation, tagged)

    def reverse_meta(self, src: str, trg: str) -> ModelMeta:
        """What the pair's reverse (target-to-source) model records: it translates the cleaned target-language text."""
        return ModelMeta(trg, src, self.cleaning.normalize_punctuation)

    def synthetic(self, variant: str) -> SyntheticConfig:
        """How a variant's synthetic corpus is filtered and mixed with the real one."""
        return self.backtranslation.variants[variant].synthetic

    def train_max_length(self, stage: str) -> int:
        """The largest ``max_length`` of the models that train on a stage's data (a model with a smaller one cuts
        its batches), the length limit of binarizing it."""
        models = {BASELINE: self.models, DISTILLED: self.students}.get(stage, self.backtranslation.models)
        return max(self.models[model].training.max_length for model in models)

    def describe_data(self, stage: str) -> str:
        """The data column of the result table: ``parallel``, e.g. ``parallel+bt (sample-top10, tagged)``, or
        ``distilled (...)``."""
        if stage == BASELINE:
            return "parallel"
        if stage == DISTILLED:
            teacher = self.models[self.distillation.teacher]
            return self.distillation.describe(f"{teacher.arch} {teacher.size}".strip())
        return self.backtranslation.variants[stage].describe()

    def system_row(self, pair: str, test: str, run: Run, hyp: str, ref: str) -> dict[str, Any]:
        """What identifies a row of the result table, and its translation ``hyp`` of the reference ``ref``
        (significance tests name the translations they compare)."""
        model = self.models[run.model]
        row = {
            "pair": pair,
            "testset": test,
            "model": model.name,
            "arch": model.arch,
            "size": model.size,
            "stage": run.stage,
            "data": self.describe_data(run.stage),
            "seed": ENSEMBLE if run.name == ENSEMBLE else self.run_seeds(run.name)[0],
            "hyp": hyp,
            "ref": ref,
        }
        if run.name == ENSEMBLE:
            row["members"] = len(self.seeds)
        return row


def load_experiment(config: dict[str, Any]) -> Experiment:
    """Build the experiment from a config that its JSON schema validated and filled with defaults.

    :param config: the workflow config (Snakemake's ``config`` after ``validate``)
    :return: the experiment
    :raises ConfigError: one line naming the key, on a value nmt rejects or a name that refers to nothing
    """
    corpora = {name: from_dict(CorpusConfig, spec, f"corpora.{name}") for name, spec in config["corpora"].items()}
    cleaning = from_dict(CleanConfig, config["cleaning"], "cleaning")
    subword = from_dict(SubwordConfig, config["subword"], "subword")
    decoding = from_dict(DecodeConfig, config["decoding"], "decoding")
    if config["training"].get("corpus_weights") is not None:
        raise ConfigError("training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)")
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
    backtranslation = parse_backtranslation(config["backtranslation"], config["training"], models, data)
    distillation = parse_distillation(config["distillation"], models, backtranslation)
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
    )
    for name in data.train:
        experiment.corpus_cleaning(name)  # a bad value of a corpus's own cleaning keys fails now
    return experiment


def parse_model(name: str, options: dict[str, Any], training: dict[str, Any], where: str) -> Model:
    """A model entry (``arch``, ``size``, architecture keys, ``training``): each model trains with the shared
    ``training`` section, updated by its own ``training:`` keys.

    :param where: the config path of the entry, named in errors, e.g. ``models.transformer``
    """
    own_training = options.get("training", {})
    if isinstance(own_training, dict) and "corpus_weights" in own_training:
        raise ConfigError(f"{where}.training.corpus_weights: set each training corpus's weight (corpora.NAME.weight)")
    train_config = from_dict(TrainConfig, {**training, **own_training}, f"{where}.training")
    options = {k: v for k, v in options.items() if k != "training"}
    arch, arch_config = resolve_model_options(options, where)
    return Model(name, options, arch, arch_config, train_config)


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
    )


def parse_distillation(
    section: dict[str, Any], models: dict[str, Model], backtranslation: Backtranslation
) -> Distillation | None:
    """The ``distillation`` section (None without students): the teacher must be a system the experiment trains,
    the students keys of ``models``, and with ``ctranslate2`` quantizations each student a Transformer decoded
    greedily or by sampling (what CTranslate2 runs here)."""
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
        if quantizations and models[student].arch != "transformer":
            raise ConfigError(
                f"distillation.students: '{student}' is a {models[student].arch}, which cannot be exported to "
                "CTranslate2 (Transformer only): set distillation.ctranslate2: [] or make the student a transformer"
            )
    if quantizations and decoding.method == "beam":
        raise ConfigError(
            "distillation.decoding: the CTranslate2 rows decode with method greedy or sample, not beam; "
            "set distillation.decoding.method to greedy (what Kim and Rush's students use) or ctranslate2: []"
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
