"""The experiment a workflow config describes: its data, models, back-translation, distillation, decoding and
result-table systems, and the questions the workflow's rules ask of it.

Torch-free, since Snakemake parses the workflow on a login node that need not have torch. :mod:`nmt.config_file`
reads a config into an :class:`Experiment`; workflow/rules/common.smk answers every param and input function from it.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

from nmt.config import (
    CleanConfig,
    CorpusConfig,
    DecodeConfig,
    SubwordConfig,
    SyntheticConfig,
    TablesConfig,
    TrainConfig,
)
from nmt.model_config import ModelMeta
from nmt.multilingual import PIVOT, Multilingual, MultilingualSystem

# The stage of the models trained on the parallel data only; the other stages are back-translation variants.
BASELINE = "baseline"
# The run of all seeds' models decoding together (when there are two or more seeds).
ENSEMBLE = "ensemble"
# The stage of the students of knowledge distillation, trained on the teacher's translations of the training source.
DISTILLED = "distilled"
# The corpus of a back-translation variant's synthetic pairs (its file name, so its name in the binarized data), and
# the name a training stage's ``data`` mix gives it; ``real`` names the training corpora (data.train) together.
SYNTHETIC = "synthetic"
REAL = "real"


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
    stages: tuple[dict[str, Any], ...] = ()  # training.stages as written: training keys and a ``data`` mix each

    @property
    def size(self) -> str:
        """The size as the tables name it: the named size, then each architecture key written beside it, e.g.
        ``small, d_model 128, ff_dim 512`` (a label that says ``small`` of a changed model would mislead)."""
        keys = [f"{key} {value}" for key, value in self.options.items() if key not in ("arch", "size")]
        return ", ".join([self.options["size"], *keys] if "size" in self.options else keys)

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

    def describe(self, iterations: int = 1) -> str:
        """The data column of the result table, e.g. ``parallel+bt (sample-top10, tagged, real x2, 2 iterations)``."""
        details = [self.generation.describe()]
        if self.synthetic.tagged:
            details.append("tagged")
        if self.synthetic.upsample_real > 1:
            details.append(f"real x{self.synthetic.upsample_real}")
        if iterations > 1:
            details.append(f"{iterations} iterations")
        return f"parallel+bt ({', '.join(details)})"


@dataclass(frozen=True)
class Backtranslation:
    """The reverse (target-to-source) model, the monolingual sample, and the variants the listed models train on.

    With ``iterations`` N > 1 (iterative back-translation, Hoang et al. 2018), rounds 2..N of each variant train a
    forward model (``reverse``'s settings, source-to-target) on the real corpora and the previous round's synthetic
    corpus, forward-translate the source-language monolingual sample, train a new reverse model on the real corpora
    and those pairs reversed, and back-translate the target-language sample again; the variant's systems train on
    round N's corpus."""

    models: tuple[str, ...]
    reverse: Model
    variants: dict[str, Variant]
    max_sentences: int | None
    chunk_lines: int
    seed: int
    iterations: int = 1
    sentence_form: bool = False

    @property
    def later_rounds(self) -> list[int]:
        """The rounds after the first (none without iterative back-translation)."""
        return list(range(2, self.iterations + 1)) if self.models else []


@dataclass(frozen=True)
class Distillation:
    """Sequence-level knowledge distillation (Kim and Rush 2016): the teacher system (a model of ``models`` on one
    stage, the ensemble of its seeds when there are several) translates the cleaned training source with
    ``generation``; each student (a model of ``models``) is trained again on the result (stage ``distilled``),
    decoded with ``decoding`` in all its stages, and each CTranslate2 ``quantizations`` export of its first seed's
    distilled model is decoded too, for the distillation table."""

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
class DistillationRow:
    """A row of the distillation table: a run decoded in torch, or (``quantization``) its CTranslate2 export."""

    role: str
    model: str
    stage: str
    run: str
    quantization: str | None = None


@dataclass(frozen=True)
class Experiment:
    """Everything the workflow builds, from a validated config (see :func:`nmt.config_file.load_experiment`)."""

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
    multilingual: Multilingual = dataclasses.field(default_factory=Multilingual)

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

    @property
    def eval_pairs(self) -> list[str]:
        """Every pair of the result table: the pairs, then those that only multilingual systems (a direction with its
        reverse's data, or zero-shot) and pivot cascades translate; each has its dev and test sets."""
        return list(dict.fromkeys([*self.pairs, *self.multilingual.pairs()]))

    def pair_runs(self, pair: str) -> list[Run]:
        """The runs of a pair's group of the result table: every system's if it is a pair of the config, then those of
        each multilingual system that serves it (``{stage}`` its kind) and of each model's pivot cascade."""
        return (self.scored_runs() if pair in self.pairs else []) + self.row_runs(pair)

    def row_runs(self, pair: str) -> list[Run]:
        """The runs of the multilingual systems and pivot cascades that translate ``pair``."""
        return [Run(name, kind, run) for name, kind in self.multilingual.rows(pair, self.models) for run in self.runs]

    def pair_compared_runs(self, pair: str) -> list[Run]:
        """:meth:`compared_runs` for the group of ``pair`` with its multilingual and pivot rows: they are tested
        against the pair's bilingual baseline; in a pair without one (no data) against the baseline model's pivot
        cascade, else the first row, each's first seed."""
        if pair in self.pairs:
            return self.compared_runs() + self.row_runs(pair)
        runs = self.row_runs(pair)
        pivot = Run(self.baseline, PIVOT, self.runs[0])
        reference = pivot if pivot in runs else runs[0]
        others = [r for r in runs if (r.model, r.stage) != (reference.model, reference.stage) or r.name == ENSEMBLE]
        return [reference, *others]

    def system_of(self, name: str) -> MultilingualSystem:
        return self.multilingual.systems[name]

    def data_pair(self, direction: str) -> str:
        """The pair of the config whose cleaned corpora a multilingual system's direction trains on: the direction
        itself, or its reverse (the same pairs read the other way)."""
        return direction if direction in self.pairs else "-".join(direction.split("-")[::-1])

    def multilingual_training(self, name: str, seed: int) -> TrainConfig:
        """The training of one seed of a multilingual system: its model's, with the system's keys and temperature;
        the dev BLEU's target language is its target language when it has one (else BLEU's default tokenizer)."""
        system = self.system_of(name)
        trg_lang = system.trg_langs[0] if len(system.trg_langs) == 1 else ""
        return dataclasses.replace(system.training, seed=seed, trg_lang=trg_lang)

    def multilingual_meta(self, name: str) -> ModelMeta:
        """What a multilingual model records for translation: its directions (so its tags and source languages),
        and its one source or target language where it has one."""
        system = self.system_of(name)
        src, trg = (langs[0] if len(langs) == 1 else "" for langs in (system.src_langs, system.trg_langs))
        return ModelMeta(src, trg, self.cleaning.normalize_punctuation, directions=list(system.directions))

    def row_model(self, run: Run) -> Model:
        """The model entry a row is built from: a multilingual system's ``model``, else the run's own."""
        name = run.model
        if run.stage != PIVOT and name in self.multilingual.systems:
            name = self.system_of(name).model
        return self.models[name]

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
        """The training of one run: its seed, the target language of its dev BLEU, the corpus weights of its data,
        and its stages with each ``data`` mix resolved to shares per corpus (``threads: 0`` stays the job's,
        :meth:`nmt.config.TrainConfig.on_threads`, so that another ``--cores`` reruns nothing)."""
        own = self.models[model]
        weights = self.corpus_weights(stage)
        training = dataclasses.replace(own.training, seed=seed, trg_lang=trg_lang, corpus_weights=weights)
        return self._staged(training, own.stages, stage in self.backtranslation.variants)

    def reverse_training(self, trg_lang: str, variant: str = BASELINE) -> TrainConfig:
        """The training of a model with the reverse model's settings, translating into ``trg_lang``: the reverse model
        itself on the parallel data reversed (the same corpora, the same weights), or with a ``variant`` a later
        round's forward or reverse model (:class:`Backtranslation`), on the real corpora and a synthetic corpus of the
        variant weighted as its systems weight theirs (its stages' ``synthetic`` share drawn from that corpus)."""
        reverse = self.backtranslation.reverse
        weights = self.corpus_weights(variant)
        training = dataclasses.replace(reverse.training, trg_lang=trg_lang, corpus_weights=weights)
        return self._staged(training, reverse.stages, synthetic=variant != BASELINE)

    def corpus_weights(self, stage: str = BASELINE) -> dict[str, float] | None:
        """How often each corpus of a stage's training data is drawn per epoch, by name: each training corpus's
        ``weight`` (times a variant's ``upsample_real``), the synthetic corpus once; None when every weight is 1.
        A distilled corpus is one file and trains unweighted."""
        if stage == DISTILLED:
            return None
        upsample = self.synthetic(stage).upsample_real if stage in self.backtranslation.variants else 1
        weights = {name: self.corpora[name].weight * upsample for name in self.data.train}
        if stage in self.backtranslation.variants:
            weights[SYNTHETIC] = 1
        return weights if any(weight != 1 for weight in weights.values()) else None

    def _staged(self, training: TrainConfig, stages: tuple[dict[str, Any], ...], synthetic: bool) -> TrainConfig:
        """``training`` with its stages, each stage's ``data`` mix as ``mix`` shares per corpus name (a stage without
        ``data`` draws by the corpus weights). ``real`` is shared among the training corpora by their weights; a
        system without synthetic data (a baseline) trains the same stages on the rest of each mix."""
        if not stages:
            return training
        real = {name: self.corpora[name].weight for name in self.data.train}
        resolved = []
        for stage in stages:
            keys = {k: v for k, v in stage.items() if k != "data"}
            if "data" not in stage:
                resolved.append({**keys, "corpus_weights": training.corpus_weights})
                continue
            mix: dict[str, float] = {}
            for name, share in stage["data"].items():
                if name == REAL:
                    mix |= {corpus: share * weight / sum(real.values()) for corpus, weight in real.items()}
                elif name != SYNTHETIC or synthetic:
                    mix[name] = share
            resolved.append({**keys, "mix": mix})
        return dataclasses.replace(training, corpus_weights=None, stages=resolved)

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

    def decoding_jobs(self) -> list[tuple[str, DecodeConfig, list[str]]]:
        """Every search the workflow's decoding jobs run, where the config sets it, and the architecture of each
        model of one such job (several: an ensemble): the test sets' of each run, back-translation's (the reverse
        model's and its rounds', of the reverse model's architecture), and the teacher's."""
        jobs = []
        for run in self.scored_runs():
            where = "distillation.decoding" if run.model in self.students else "decoding"
            archs = [self.models[run.model].arch] * len(self.run_seeds(run.name))
            jobs.append((where, self.test_decoding(run.model), archs))
        bt = self.backtranslation
        for variant in bt.variants.values() if bt.models else ():
            jobs.append((f"backtranslation.variants.{variant.name}.generation", variant.generation, [bt.reverse.arch]))
        if self.distillation:
            teacher = [self.models[self.distillation.teacher].arch] * len(self.seeds)
            jobs.append(("distillation.generation", self.distillation.generation, teacher))
        return jobs

    def distillation_rows(self) -> list[DistillationRow]:
        """The rows of the distillation table: the teacher's run (the ensemble of its seeds when there are several),
        then per student its first seed on the parallel data, distilled, and each CTranslate2 export of that."""
        d, first = self.distillation, f"seed{self.seeds[0]}"
        rows = [DistillationRow("teacher", d.teacher, d.teacher_stage, self.runs[-1])]
        for student in d.students:
            rows += [
                DistillationRow("student", student, BASELINE, first),
                DistillationRow("student", student, DISTILLED, first),
            ]
            rows += [DistillationRow("student", student, DISTILLED, first, q) for q in d.quantizations]
        return rows

    def model_meta(self, src: str, trg: str, stage: str) -> ModelMeta:
        """What a model directory records for translation: languages, source normalization, BT tagging."""
        tagged = stage in self.backtranslation.variants and self.backtranslation.variants[stage].synthetic.tagged
        return ModelMeta(src, trg, self.cleaning.normalize_punctuation, tagged)

    def reverse_meta(self, src: str, trg: str) -> ModelMeta:
        """What the pair's reverse (target-to-source) model records: it translates the cleaned target-language text."""
        return ModelMeta(trg, src, self.cleaning.normalize_punctuation)

    def round_meta(self, src: str, trg: str, variant: str) -> ModelMeta:
        """What a later round's model translating ``src`` into ``trg`` records: its synthetic sources carry the tag
        when the variant's do."""
        return ModelMeta(src, trg, self.cleaning.normalize_punctuation, self.synthetic(variant).tagged)

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
        return self.backtranslation.variants[stage].describe(self.backtranslation.iterations)

    def system_row(self, pair: str, test: str, run: Run, hyp: str, ref: str) -> dict[str, Any]:
        """What identifies a row of the result table, and its translation ``hyp`` of the reference ``ref``
        (significance tests name the translations they compare)."""
        model = self.row_model(run)
        bilingual = run.stage in self.stages
        row = {
            "pair": pair,
            "testset": test,
            "model": run.model,
            "arch": model.arch,
            "size": model.size,
            "stage": run.stage,
            "data": self.describe_data(run.stage)
            if bilingual
            else self.multilingual.describe(run.model, run.stage, pair),
            "seed": ENSEMBLE if run.name == ENSEMBLE else self.run_seeds(run.name)[0],
            "hyp": hyp,
            "ref": ref,
        }
        if run.name == ENSEMBLE:
            row["members"] = len(self.seeds)
        if not bilingual and run.stage != PIVOT:  # one model's cost, shown in the group of every pair it serves
            row["shared_by"] = len(self.system_of(run.model).served)
        return row
