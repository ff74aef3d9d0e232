# Config validation, wildcard constraints, the get_* param and input functions (each a question to nmt.experiment),
# and the parse-time lists of files that rule all and collect_scores ask for.

import dataclasses
import os
import sys

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

from nmt.atomic import remove_stale_temp_files
from nmt.config_file import check_config, load_experiment
from nmt.data.download import MIRROR_ENV, local_file
from nmt.errors import ConfigError
from nmt.experiment import BASELINE, DISTILLED, SYNTHETIC, Run
from nmt.runtime import choose_runtime, ctranslate2_installed
from nmt.multilingual import MULTILINGUAL, PIVOT, ZERO_SHOT


# A bad key stops the run with one line naming it, before validate() fills in the schema's defaults.
try:
    check_config(config, workflow.source_path("../schemas/config.schema.yaml"), workflow.config_settings.config)
    validate(config, "../schemas/config.schema.yaml")
    EXPERIMENT = load_experiment(config)
except ConfigError as e:
    sys.exit(f"config error: {e}")
BT = EXPERIMENT.backtranslation
KD = EXPERIMENT.distillation
ML = EXPERIMENT.multilingual
# The mirror reaches the download jobs through the environment rather than a param, so switching
# between a mirror and the internet does not make Snakemake redo the downloads and all that follows.
if config["mirror"]:
    os.environ[MIRROR_ENV] = os.path.abspath(config["mirror"])


# Built from the config, so a path of an undefined language, stage, variant, seed or run has no rule
# (models, pairs and corpora are checked by the get_* helpers, with a message naming the defined ones: so the
# sides of a pair take any language code, and a pair the config lacks, such as en-fr, gets that message).
wildcard_constraints:
    src="[a-z][a-z][a-z]?",
    trg="[a-z][a-z][a-z]?",
    lang="|".join(EXPERIMENT.langs),
    corpus="[A-Za-z0-9][A-Za-z0-9_.-]*",
    model="[A-Za-z0-9_]+",
    stage="|".join(EXPERIMENT.stages),
    seed="|".join(map(str, EXPERIMENT.seeds)),
    run="|".join(EXPERIMENT.runs),
    variant="|".join(BT.variants),
    round="|".join(map(str, BT.later_rounds)) or "(?!)",  # (?!) matches nothing: no later rounds, no such path
    direction="forward|reverse",
    part="[0-9]+",
    quantization="[a-z0-9_]+",
    system="|".join(ML.systems) or "(?!)",
    kind=f"{MULTILINGUAL}|{ZERO_SHOT}",


def per_attempt(base):
    """Resource function for ``mem_mb`` (MB) and ``runtime`` (minutes): more on each attempt (``--retries``)."""
    return lambda wildcards, attempt: base * attempt


def defined(key, name, names):
    """``name``, or exit with one line if a requested path names a pair, model or corpus the config lacks."""
    if name not in names:
        sys.exit(f"error: '{name}' is not defined under {key} in the config (defined: {', '.join(names)})")
    return name


# Keys that config dataclasses gained after runs were made, left out of a param while at their default, so that the
# jobs of those runs keep their params and a finished run reruns nothing (by the dataclass's name).
KEYS_LEFT_OUT_AT_DEFAULT = {
    "TrainConfig": ("temperature",),  # multilingual systems
    "ModelMeta": ("directions",),  # multilingual systems
    "DecodeConfig": ("length_normalization", "quantization"),  # CTranslate2's beam search and weights
}


def plain(value):
    """A config dataclass as a plain dict, the form of every settings param: Snakemake records plain params and
    reruns the jobs whose params changed, but skips objects it cannot represent (a changed setting would keep a
    stale result). Scripts build the dataclass again with nmt.config.from_dict (a key left out is its default)."""
    if not dataclasses.is_dataclass(value):
        return value
    left_out = KEYS_LEFT_OUT_AT_DEFAULT.get(type(value).__name__, ())
    defaults = {f.name: f.default for f in dataclasses.fields(value)}
    return {k: v for k, v in dataclasses.asdict(value).items() if k not in left_out or v != defaults[k]}


def ask(question, *names):
    """Param or input function: the experiment's answer to ``question`` about a job, asked with the values of its
    wildcards ``names`` (a model the config does not define ends Snakemake with one line, see get_model); a
    config dataclass comes as a plain dict (see plain)."""
    return lambda wildcards: plain(
        question(*(get_model(wildcards).name if n == "model" else wildcards[n] for n in names))
    )


def get_pair(wildcards):
    return defined("pairs", f"{wildcards.src}-{wildcards.trg}", EXPERIMENT.pairs)


def get_model(wildcards):
    return EXPERIMENT.models[defined("models", wildcards.model, list(EXPERIMENT.models))]


def get_corpus(wildcards):
    return EXPERIMENT.corpora[defined("corpora", wildcards.corpus, list(EXPERIMENT.corpora))]


def get_tokenized_ref(wildcards):
    """Input function of score_translations: the test set's official tokenized reference, where the config gives one."""
    if not EXPERIMENT.corpora[wildcards.test].tokenized_ref:
        return []
    return [f"results/data/tokenized_ref/{wildcards.test}.{wildcards.trg}"]


def get_tokenized_ref_source(wildcards):
    """The URL and sha256 (or None) of one language's official tokenized reference of a corpus."""
    settings = get_corpus(wildcards).tokenized_ref
    if not settings:
        sys.exit(f"error: corpora.{wildcards.corpus} has no tokenized_ref in the config")
    return {"url": settings["url"].replace("{lang}", wildcards.lang), "sha256": settings.get("sha256", {}).get(wildcards.lang)}


def get_corpus_settings(wildcards):
    """What fetching a corpus depends on (not its cleaning keys or weight: changing those fetches nothing)."""
    return get_corpus(wildcards).import_settings()


def get_cleaning(wildcards):
    """The cleaning of one training corpus: the cleaning section with the corpus's own cleaning keys."""
    return plain(EXPERIMENT.corpus_cleaning(defined("corpora", wildcards.corpus, list(EXPERIMENT.corpora))))


def get_corpus_sources(wildcards):
    return tuple(get_corpus(wildcards).source(lang) for lang in (wildcards.src, wildcards.trg))


def get_archive(wildcards):
    """The archive (zip, tar, TSV, OPUS zip) a corpus side is extracted from; none for per-language files."""
    return ["results/data/archive/{corpus}"] if get_corpus(wildcards).archived else []


def get_download(side):
    """Input function of the downloaded file of a corpus's ``side`` ("src", "trg") for a pair of the result table."""

    def inputs(wildcards):
        defined("pairs", f"{wildcards.src}-{wildcards.trg}", EXPERIMENT.eval_pairs)
        return f"results/data/download/{wildcards.corpus}.{getattr(wildcards, side)}"

    return inputs


def get_eval_files(wildcards):
    langs = (wildcards.src, wildcards.trg)
    return [f"results/{get_pair(wildcards)}/data/eval/{n}.{lang}" for n in EXPERIMENT.data.eval_sets for lang in langs]


def get_corpus_files(role, side):
    """Input function of the ``side`` ("src", "trg") of a stage's training data (a list) or of the dev set."""

    def inputs(wildcards):
        pair, lang, stage = get_pair(wildcards), getattr(wildcards, side), getattr(wildcards, "stage", "baseline")
        if role == "dev":
            return f"results/{pair}/data/eval/{EXPERIMENT.data.dev}.{lang}"
        if stage == DISTILLED:
            return [f"results/{pair}/distillation/train.{lang}"]
        real = [f"results/{pair}/data/clean/{name}.{lang}" for name in EXPERIMENT.data.train]
        if stage != BASELINE:
            return real + [f"{round_folder(pair, stage, BT.iterations)}/{SYNTHETIC}.{lang}"]
        return real

    return inputs


def round_folder(pair, variant, round):
    """The folder of a round of a variant's back-translation: the variant's own for round 1, its round{k}/ after."""
    folder = f"results/{pair}/backtranslation/{variant}"
    return folder if int(round) == 1 else f"{folder}/round{round}"


def round_langs(wildcards):
    """The source and target language of a later round's model: the pair's (forward), or reversed (reverse)."""
    langs = (wildcards.src, wildcards.trg)
    return langs if wildcards.direction == "forward" else langs[::-1]


def get_round_files(role, side):
    """Input function of the ``side`` ("src", "trg") of a later round's model, in its own direction: its subword
    model, dev set, or training data ("train"): the real corpora and a synthetic corpus of the variant, the previous
    round's (forward model) or this round's forward-translated pairs, whose translations are its sources (reverse)."""

    def inputs(wildcards):
        pair, lang = get_pair(wildcards), dict(zip(("src", "trg"), round_langs(wildcards)))[side]
        if role == "subword":
            return f"results/{pair}/subword/{lang}.model"
        if role == "dev":
            return f"results/{pair}/data/eval/{EXPERIMENT.data.dev}.{lang}"
        if wildcards.direction == "forward":
            synthetic = round_folder(pair, wildcards.variant, int(wildcards.round) - 1)
        else:
            synthetic = f"{round_folder(pair, wildcards.variant, wildcards.round)}/forward_corpus"
        real = [f"results/{pair}/data/clean/{name}.{lang}" for name in EXPERIMENT.data.train]
        return real + [f"{synthetic}/{SYNTHETIC}.{lang}"]

    return inputs


def get_round_training(wildcards):
    return plain(EXPERIMENT.reverse_training(round_langs(wildcards)[1], wildcards.variant))


def get_round_meta(wildcards):
    return plain(EXPERIMENT.round_meta(*round_langs(wildcards), wildcards.variant))


def get_round_reports(wildcards):
    """Input function of a variant's table of rounds: per round the reverse model's summary and the synthetic
    corpus's report; per later round the forward model's summary and its translated corpus's report."""
    pair, variant, later = get_pair(wildcards), wildcards.variant, BT.later_rounds
    folders = [round_folder(pair, variant, k) for k in later]
    return {
        "reverse_summaries": [f"results/{pair}/backtranslation/reverse/summary.json"]
        + [f"{folder}/reverse/summary.json" for folder in folders],
        "synthetic_reports": [f"{round_folder(pair, variant, k)}/report.json" for k in (1, *later)],
        "forward_summaries": [f"{folder}/forward/summary.json" for folder in folders],
        "forward_reports": [f"{folder}/forward_corpus/report.json" for folder in folders],
    }


def round_tables():
    """The tables of the rounds of iterative back-translation, one per pair and variant (none with one round)."""
    if not BT.later_rounds:
        return []
    return expand("results/{pair}/backtranslation/{variant}/rounds.md", pair=EXPERIMENT.pairs, variant=BT.variants)


def report_pages():
    """The HTML pages of the data reports that Snakemake's report shows (the result tables' come with them): each
    training corpus's cleaning, and with back-translation the monolingual sample and each variant's corpus."""
    pages = expand("results/{pair}/data/clean/{corpus}.report.html", pair=EXPERIMENT.pairs, corpus=EXPERIMENT.data.train)
    if BT.models:
        pages += expand("results/{pair}/data/mono/mono.report.html", pair=EXPERIMENT.pairs)
        pages += expand("results/{pair}/backtranslation/{variant}/report.html", pair=EXPERIMENT.pairs, variant=BT.variants)
    return pages


def split_parts(checkpoint, wildcards, lang):
    """The folder a split checkpoint of the pair wrote, and the names of its parts (0000, 0001, ...)."""
    parts_dir = checkpoint.get(src=wildcards.src, trg=wildcards.trg).output.parts
    return parts_dir, sorted(glob_wildcards(f"{parts_dir}/{{part}}.{lang}").part)


def get_bt_parts(wildcards):
    """Input function (after the split checkpoint): the monolingual parts and their back-translations (by the reverse
    model of round 1, or of the job's later ``round``)."""
    parts_dir, parts = split_parts(checkpoints.split_monolingual, wildcards, wildcards.trg)
    pair = f"{wildcards.src}-{wildcards.trg}"
    folder = f"{round_folder(pair, wildcards.variant, wildcards.get('round', 1))}/parts"
    return {
        "bt_trg": [f"{parts_dir}/{part}.{wildcards.trg}" for part in parts],
        "bt_src": [f"{folder}/{part}.{wildcards.src}" for part in parts],
    }


def get_forward_parts(wildcards):
    """Input function (after the source split checkpoint): in the direction of the round's reverse model, the forward
    model's translations of the source-language parts (``bt_src``: they are its sources) and those parts (``bt_trg``)."""
    parts_dir, parts = split_parts(checkpoints.split_source_monolingual, wildcards, wildcards.src)
    pair = f"{wildcards.src}-{wildcards.trg}"
    folder = f"{round_folder(pair, wildcards.variant, wildcards.round)}/forward_corpus/parts"
    return {
        "bt_trg": [f"{parts_dir}/{part}.{wildcards.src}" for part in parts],
        "bt_src": [f"{folder}/{part}.{wildcards.trg}" for part in parts],
    }


def get_distill_parts(wildcards):
    """Input function (after the split checkpoint): the parts of the training source and the teacher's translations."""
    parts_dir, parts = split_parts(checkpoints.split_distillation_source, wildcards, wildcards.src)
    folder = f"results/{wildcards.src}-{wildcards.trg}/distillation/teacher"
    return {
        "source": [f"{parts_dir}/{part}.{wildcards.src}" for part in parts],
        "teacher": [f"{folder}/{part}.{wildcards.trg}" for part in parts],
    }


def distillation(name):
    """Param function: a setting of the distillation section (asked only of the jobs of a config with students)."""
    return lambda wildcards: plain(getattr(KD, name))


def seed_files(pair, model, stage, seeds, name="model.pt"):
    """The file ``name`` of the model directory of each of ``seeds`` of a system (several decode as an ensemble)."""
    return [f"results/{pair}/{model}/{stage}/seed{seed}/model/{name}" for seed in seeds]


def get_teacher_files(wildcards):
    """Input function: the teacher's model files, one per seed."""
    return seed_files(get_pair(wildcards), KD.teacher, KD.teacher_stage, EXPERIMENT.seeds)


def jobs_import_ctranslate2():
    """Whether the decoding jobs can import ctranslate2, which runtime auto needs to pick CTranslate2: with --sdm
    conda they run in envs/nmt.yaml, which has it; else in the environment that runs Snakemake (a cluster job starts
    `python -m snakemake` from it)."""
    return DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method or ctranslate2_installed()


def decoding_files(models, arch, decoding):
    """A decoding job's model files: ``models`` (model.pt, several: an ensemble) of architecture ``arch``, or, when
    the runtime of its search ``decoding`` is ctranslate2 or auto picks it (nmt.runtime.choose_runtime), the
    CTranslate2 export of its one model with the search's weights, which export_model writes once for every job."""
    runtime, _ = choose_runtime(decoding, [arch] * len(models), jobs_import_ctranslate2())
    if runtime == "torch":
        return models
    return [f"{os.path.dirname(models[0])}/ctranslate2/{decoding.quantization}/model.bin"]


def get_test_models(wildcards):
    """Input function of translate_test: its run's models, or their export (decoding_files)."""
    model = get_model(wildcards)
    return decoding_files(get_run_files("model.pt")(wildcards), model.arch, EXPERIMENT.test_decoding(model.name))


def get_generation_models(path):
    """Input function of a back-translation job (of round 1 or a later one): the model.pt at ``path`` (with the job's
    wildcards), or its export (decoding_files) when the variant's search of the part runs in CTranslate2."""
    return lambda w: decoding_files(expand(path, **w), BT.reverse.arch, EXPERIMENT.generation(w.variant, w.part))


def get_teacher_models(wildcards):
    """Input function of distill_part: the teacher's model files, or its export (decoding_files)."""
    teacher = EXPERIMENT.models[KD.teacher].arch
    return decoding_files(get_teacher_files(wildcards), teacher, distill_generation(wildcards.part))


def distillation_row_files(pair, test, row):
    """The files of a row of the distillation table as its decoding job (translate_test, or translate_export for a
    CTranslate2 export) writes and reads them: its translation of ``test``, its model files (the ensemble's, one per
    seed), the source it translated, and the reference."""
    src, trg = pair.split("-")
    if row.quantization is None:
        hyp = f"results/{pair}/{row.model}/{row.stage}/{row.run}/translations/{test}.{trg}"
        seeds = seed_files(pair, row.model, row.stage, EXPERIMENT.run_seeds(row.run))
        models = decoding_files(seeds, EXPERIMENT.models[row.model].arch, EXPERIMENT.test_decoding(row.model))
    else:
        hyp = f"results/{pair}/{row.model}/distilled/{row.run}/ctranslate2/{row.quantization}/translations/{test}.{trg}"
        models = [f"results/{pair}/{row.model}/distilled/{row.run}/model/ctranslate2/{row.quantization}/model.bin"]
    src_file, ref = f"results/{pair}/data/eval/{test}.{src}", f"results/{pair}/data/eval/{test}.{trg}"
    return {"hyp": hyp, "models": models, "src": src_file, "ref": ref}


def get_distillation_rows(wildcards):
    """The distillation table's rows per pair and test set: what identifies each, its search, and its files."""
    rows = []
    for pair in EXPERIMENT.pairs:
        for test in EXPERIMENT.data.test:
            for row in EXPERIMENT.distillation_rows():
                decoding = KD.export_decoding if row.quantization else EXPERIMENT.test_decoding(row.model)
                files = distillation_row_files(pair, test, row)
                rows.append({**plain(row), "pair": pair, "test": test, "decoding": plain(decoding), **files})
    return rows


def get_distillation_files(wildcards):
    rows = get_distillation_rows(wildcards)
    return {
        "hyps": [row["hyp"] for row in rows],
        "models": sorted({model for row in rows for model in row["models"]}),
        "srcs": sorted({row["src"] for row in rows}),
        "refs": sorted({row["ref"] for row in rows}),
    }


def get_data_prefix(wildcards, input, output):
    """The prefix of a binarized training set: its header (the rule's first data file) without .json."""
    return (output.get("data") or input.data)[0].removesuffix(".json")


def get_run_files(name):
    """Input function of the file ``name`` of the model(s) a run translates with: its seed's, or every seed's."""
    return lambda w: seed_files(f"{w.src}-{w.trg}", w.model, w.stage, EXPERIMENT.run_seeds(w.run), name)


def get_training(wildcards):
    model = get_model(wildcards).name
    return plain(EXPERIMENT.training(model, int(wildcards.seed), wildcards.trg, wildcards.stage))


def training_threads(training):
    """A training job's threads: the config's ``threads`` when set (``threads: 1`` lets two trainings share two
    cores side by side, which trains more tokens per second in all than one job on both), else 8, capped at --cores."""
    return lambda wildcards: training(wildcards)["threads"] or 8


def data_threads(most):
    """A data or decoding job's threads: with ``training.threads`` set, as many as a training has, so that the job
    fits beside a running training (Snakemake never gives a job fewer threads than it asks, so a 2-thread job
    beside two 1-thread trainings would wait for both to end); else ``most``, capped at --cores."""
    return config.get("training", {}).get("threads") or most


def get_label_smoothing(wildcards):
    return get_model(wildcards).training.label_smoothing


def get_reverse_training(wildcards):
    return plain(EXPERIMENT.reverse_training(wildcards.src))


def get_system(wildcards, input):
    run = Run(get_model(wildcards).name, wildcards.stage, wildcards.run)
    return EXPERIMENT.system_row(f"{wildcards.src}-{wildcards.trg}", wildcards.test, run, input.hyp, input.ref)


def get_distill_generation(wildcards):
    return plain(distill_generation(wildcards.part))


def distill_generation(part):
    """The teacher's search for one part of the training source (``part``: its name, a number such as ``0003``):
    sampling draws with the generation's seed plus the part's number, so that the parts do not repeat one another's
    draws (as back-translation's parts, Experiment.generation). Beam and greedy search keep the one seed, which they
    do not use, so that their parts are not rerun."""
    generation = KD.generation
    if generation.method != "sample":
        return generation
    return dataclasses.replace(generation, seed=generation.seed + int(part))


def get_timing_repeats(wildcards):
    return config["distillation"]["repeats"]


def get_timing_threads(wildcards):
    """Every core of the run (--cores), so that no other job runs beside the timing job (Snakemake starts a job only
    when its threads are free, and every job holds at least one). Without --cores (a cluster run with --jobs) it
    asks for the decoding jobs' threads, and a node of its own is the cluster profile's to give."""
    return workflow.resource_settings.cores or data_threads(8)


def run_label(run):
    """A run's name in the significance tests, e.g. ``transformer/baseline/seed1``."""
    return f"{run.model}/{run.stage}/{run.name}"


def get_significance_systems(wildcards):
    """The names of compute_significance's translations, in the order of its inputs. A param because Snakemake
    compares inputs as a sorted list: a new baseline (tables.baseline, or another first model) with one seed only
    reorders the same files, and the test would not rerun."""
    return [run_label(run) for run in EXPERIMENT.pair_compared_runs(get_eval_pair(wildcards))]


def get_significance_baseline(wildcards):
    """The name of the run every other is tested against: the baseline system's first seed."""
    return run_label(EXPERIMENT.pair_compared_runs(get_eval_pair(wildcards))[0])


def get_significance_hyps(wildcards):
    """Input function of compute_significance: the translations of the pair's compared runs, in their order."""
    pair = get_eval_pair(wildcards)
    return [
        f"results/{pair}/{run.model}/{run.stage}/{run.name}/translations/{wildcards.test}.{wildcards.trg}"
        for run in EXPERIMENT.pair_compared_runs(pair)
    ]


def get_decoding_device(wildcards):
    """The device that decodes a model's test sets: its training's (``auto`` resolves on the node that runs the job,
    and the job records what it found beside the translation)."""
    return get_model(wildcards).training.device


def get_decoding_bf16(wildcards):
    """The precision setting of the same decoding: its training's ``bf16``."""
    return get_model(wildcards).training.bf16


def decoding_records():
    """The decoding record (device, precision) of every scored translation, in the tables' device columns."""
    return [
        f"results/{pair}/{run.model}/{run.stage}/{run.name}/translations/{test}.{pair.split('-')[1]}.json"
        for pair in EXPERIMENT.eval_pairs
        for run in EXPERIMENT.pair_runs(pair)
        for test in EXPERIMENT.data.test
    ]


def score_records():
    """The score record of every row of every pair's group and test set (collect_scores' inputs)."""
    return [
        f"results/{pair}/{run.model}/{run.stage}/{run.name}/scores/{test}.json"
        for pair in EXPERIMENT.eval_pairs
        for run in EXPERIMENT.pair_runs(pair)
        for test in EXPERIMENT.data.test
    ]


def system_plots():
    """The learning curves of the configured systems (the run's targets); the tables' step removes any other."""
    return (
        expand("results/plots/{pair}.comparison.png", pair=EXPERIMENT.pairs)
        + expand(
            "results/plots/{pair}.{system.model}.{system.stage}.seed{seed}.png",
            pair=EXPERIMENT.pairs,
            system=EXPERIMENT.systems,
            seed=EXPERIMENT.seeds,
        )
        + expand("results/plots/multilingual.{system}.seed{seed}.png", system=ML.systems, seed=EXPERIMENT.seeds)
    )


def get_local_file(wildcards):
    """Input function of the jobs that read a corpus's file on disk (a local path or file:// URL): fetch_archive for
    an archive or TSV file, download_corpus (with ``lang``) for a file per language. As an input its edits rerun the
    job and what follows; none for a download or the mirror (switching to the mirror fetches nothing again), nor for
    a missing file (the job's one-line error names it)."""
    corpus, lang = get_corpus(wildcards), getattr(wildcards, "lang", None)
    if corpus.importer not in ("url", "local") or corpus.archived == (lang is not None):
        return []
    path = local_file(corpus.location if lang is None else corpus.location.replace("{lang}", lang))
    return [str(path)] if path is not None and path.is_file() else []


# Multilingual systems and pivot cascades (workflow/rules/multilingual.smk).


def get_eval_pair(wildcards):
    """The pair of a job of the result table: a pair of the config, or one that only multilingual and pivot rows
    translate."""
    return defined("pairs", f"{wildcards.src}-{wildcards.trg}", EXPERIMENT.eval_pairs)


def get_multilingual(wildcards):
    return ML.systems[defined("multilingual", wildcards.system, list(ML.systems))]


def get_trained_direction(wildcards):
    """The direction of a tag_corpus job, which some multilingual system trains on."""
    trained = list(dict.fromkeys(d for system in ML.systems.values() for d in system.directions))
    return defined("multilingual directions", f"{wildcards.src}-{wildcards.trg}", trained)


def get_direction_files(side):
    """Input function of tag_corpus: the ``side`` ("src", "trg") of a direction's cleaned training corpora, those of
    its pair or of its reverse (the same files, by language)."""

    def inputs(wildcards):
        pair, lang = EXPERIMENT.data_pair(get_trained_direction(wildcards)), getattr(wildcards, side)
        return [f"results/{pair}/data/clean/{name}.{lang}" for name in EXPERIMENT.data.train]

    return inputs


def get_direction_tags(wildcards):
    """The target language of each of tag_corpus's file pairs: the direction's."""
    return [wildcards.trg] * len(EXPERIMENT.data.train)


def direction_files(directions, folder, side):
    """The files of ``side`` ("src", "trg") of ``directions`` in ``folder``, named by direction and language."""
    return [f"{folder}/{d}.{d.split('-')[side == 'trg']}" for d in directions]


def get_system_dev(side):
    """Input function of tag_dev_set: the dev set's ``side`` in each direction of the system."""
    return lambda w: [
        f"results/{d}/data/eval/{EXPERIMENT.data.dev}.{d.split('-')[side == 'trg']}"
        for d in get_multilingual(w).directions
    ]


def get_system_dev_tags(wildcards):
    return [d.split("-")[1] for d in get_multilingual(wildcards).directions]


def get_system_train(side):
    """Input function of binarize_multilingual_corpus: the ``side`` of the system's tagged corpora, one per direction."""
    return lambda w: direction_files(get_multilingual(w).directions, "results/multilingual/data/train", side)


def get_system_texts(wildcards):
    """Input function of train_multilingual_subword: each language's cleaned text once, from the first direction
    with that language (Multi30k's captions are the same in every pair: each language once keeps them balanced)."""
    system, texts = get_multilingual(wildcards), {}
    for direction in system.directions:
        pair = EXPERIMENT.data_pair(direction)
        for lang in direction.split("-"):
            texts.setdefault(lang, [f"results/{pair}/data/clean/{name}.{lang}" for name in EXPERIMENT.data.train])
    return [path for paths in texts.values() for path in paths]


def get_system_tags(wildcards):
    return get_multilingual(wildcards).tags


def get_multilingual_subword(wildcards):
    return plain(get_multilingual(wildcards).subword)


def get_multilingual_max_length(wildcards):
    return get_multilingual(wildcards).training.max_length


def get_multilingual_training(wildcards):
    return plain(EXPERIMENT.multilingual_training(get_multilingual(wildcards).name, int(wildcards.seed)))


def get_multilingual_model_settings(wildcards):
    return EXPERIMENT.model_settings(get_multilingual(wildcards).model)


def get_multilingual_meta(wildcards):
    return plain(EXPERIMENT.multilingual_meta(get_multilingual(wildcards).name))


def get_multilingual_device(wildcards):
    return get_multilingual(wildcards).training.device


def get_multilingual_bf16(wildcards):
    return get_multilingual(wildcards).training.bf16


def get_multilingual_label_smoothing(wildcards):
    return get_multilingual(wildcards).training.label_smoothing


def get_multilingual_curve_title(wildcards):
    """The title of a multilingual system's seed's learning curves, e.g. ``m2m: de-en, en-de (multilingual, seed 1)``."""
    system = get_multilingual(wildcards)
    return f"{system.name}: {', '.join(system.directions)} (multilingual, seed {wildcards.seed})"


def get_trg_lang(wildcards):
    return wildcards.trg


def get_served_directions(wildcards):
    return list(get_multilingual(wildcards).served)


def get_zero_shot_directions(wildcards):
    return list(get_multilingual(wildcards).zero_shot)


def get_direction_dev(side):
    """Input function of score_directions: the dev set's ``side`` (the normalized source, the reference) in each
    direction the system translates, trained and zero-shot."""
    return lambda w: [
        f"results/{d}/data/eval/{EXPERIMENT.data.dev}.{d.split('-')[side == 'trg']}"
        for d in get_multilingual(w).served
    ]


def get_system_run_files(name):
    """Input function of the file ``name`` of the models of a multilingual system's run (its seed's, or every seed's),
    for a pair it serves as the path's {kind} says (else one line naming the pairs it serves)."""

    def inputs(wildcards):
        system, pair = get_multilingual(wildcards), f"{wildcards.src}-{wildcards.trg}"
        if system.kind(pair) != wildcards.kind:
            served = ", ".join(f"{d} ({system.kind(d)})" for d in system.served)
            sys.exit(f"error: multilingual system '{system.name}' does not translate {pair} as {wildcards.kind} (it translates {served})")
        seeds = EXPERIMENT.run_seeds(wildcards.run)
        return [f"results/multilingual/{system.name}/seed{seed}/model/{name}" for seed in seeds]

    return inputs


def get_multilingual_row(wildcards, input):
    run = Run(get_multilingual(wildcards).name, wildcards.kind, wildcards.run)
    return EXPERIMENT.system_row(f"{wildcards.src}-{wildcards.trg}", wildcards.test, run, input.hyp, input.ref)


def get_pivot(wildcards):
    return ML.pivots[defined("pivot", f"{wildcards.src}-{wildcards.trg}", list(ML.pivots))]


def pivot_hop(wildcards):
    """The step of the pivot cascade into the language {lang}: (its pair, the language it translates from, its place)."""
    chain = get_pivot(wildcards).chain
    if wildcards.lang not in chain[1:]:
        sys.exit(f"error: the pivot cascade {'-'.join(chain)} translates into none of its steps' language '{wildcards.lang}'")
    step = chain.index(wildcards.lang)
    return f"{chain[step - 1]}-{wildcards.lang}", chain[step - 1], step


def get_pivot_files(name):
    """Input function of a pivot step: the file ``name`` of the model's bilingual model(s) of that step's pair."""
    return lambda w: seed_files(pivot_hop(w)[0], get_model(w).name, BASELINE, EXPERIMENT.run_seeds(w.run), name)


def get_pivot_source(wildcards):
    """Input function of a pivot step: the pair's test set (the first step), or the step before's translation."""
    pair, src_lang, step = pivot_hop(wildcards)
    if step == 1:
        return f"results/{wildcards.src}-{wildcards.trg}/data/eval/{wildcards.test}.{src_lang}"
    return f"results/{wildcards.src}-{wildcards.trg}/{wildcards.model}/pivot/{wildcards.run}/translations/{wildcards.test}.{src_lang}"


def get_pivot_normalize(wildcards):
    """A later step's source is a translation: normalized as its model's training sources were (a test set is)."""
    return pivot_hop(wildcards)[2] > 1


def get_pivot_summaries(wildcards):
    """Input function of score_pivot_translations: every step's models' summaries (the cascade costs them all)."""
    model, seeds = get_model(wildcards).name, EXPERIMENT.run_seeds(wildcards.run)
    return [path for hop in get_pivot(wildcards).hops for path in seed_files(hop, model, BASELINE, seeds, "summary.json")]


def get_pivot_row(wildcards, input):
    get_pivot(wildcards)
    run = Run(get_model(wildcards).name, PIVOT, wildcards.run)
    return EXPERIMENT.system_row(f"{wildcards.src}-{wildcards.trg}", wildcards.test, run, input.hyp, input.ref)


def multilingual_targets():
    """The targets of the multilingual systems besides their rows and curves (asked by all): each seed's scores per
    direction."""
    return expand("results/multilingual/{system}/seed{seed}/directions.md", system=ML.systems, seed=EXPERIMENT.seeds)
