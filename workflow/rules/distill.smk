# Distillation stage (Kim and Rush 2016): the teacher system translates the cleaned training source in parts (a
# checkpoint splits it, as for back-translation), the distilled corpus is built from its translations, and
# train_model trains the students on it ({stage} = distilled). Each student's first seed is exported to CTranslate2
# and decoded there; one job times every row's decoding alone on the machine, and one table puts teacher and
# students side by side in quality, speed and size.


localrules:
    tabulate_distillation,


# Cut the cleaned training source into parts of chunk_lines lines; their number is known only afterwards.
checkpoint split_distillation_source:
    input:
        text=get_corpus_files("train", "src"),
    output:
        parts=directory("results/{src}-{trg}/distillation/parts"),
    params:
        chunk_lines=distillation("chunk_lines"),
    log:
        "results/logs/split_distillation_source/{src}-{trg}.log",
    priority: 10
    resources:
        mem_mb=per_attempt(1000),
        runtime=per_attempt(15),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/split_distillation_source.py"


# Translate one part with the teacher (its seeds' models as an ensemble when there are several, else its export where
# the runtime picks CTranslate2; sampling with the part's own seed).
rule distill_part:
    input:
        models=get_teacher_models,
        src="results/{src}-{trg}/distillation/parts/{part}.{src}",
    output:
        hyp="results/{src}-{trg}/distillation/teacher/{part}.{trg}",
    params:
        decoding=get_distill_generation,
    log:
        "results/logs/distill_part/{src}-{trg}.{part}.log",
    benchmark:
        "results/benchmarks/distill_part/{src}-{trg}.{part}.tsv"
    threads: data_threads(8)
    priority: 10  # the students wait for it
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate.py"


# Pair the training source with the teacher's translations (dropping degenerate ones), optionally with the real pairs.
rule build_distilled_corpus:
    input:
        unpack(get_distill_parts),
        real_src=get_corpus_files("train", "src"),
        real_trg=get_corpus_files("train", "trg"),
    output:
        src="results/{src}-{trg}/distillation/train.{src}",
        trg="results/{src}-{trg}/distillation/train.{trg}",
        report="results/{src}-{trg}/distillation/report.json",
    params:
        synthetic=distillation("synthetic"),
    log:
        "results/logs/build_distilled_corpus/{src}-{trg}.log",
    priority: 10
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/build_distilled_corpus.py"


# Translate one test set with a student's CTranslate2 export (export_model), with the students' search (the table's time of it is
# time_distillation's).
rule translate_export:
    input:
        models=["results/{src}-{trg}/{model}/distilled/seed{seed}/model/ctranslate2/{quantization}/model.bin"],
        src="results/{src}-{trg}/data/eval/{test}.{src}",
    output:
        hyp="results/{src}-{trg}/{model}/distilled/seed{seed}/ctranslate2/{quantization}/translations/{test}.{trg}",
    params:
        decoding=distillation("export_decoding"),
    log:
        "results/logs/translate_export/{src}-{trg}.{model}.seed{seed}.{quantization}.{test}.log",
    benchmark:
        "results/benchmarks/translate_export/{src}-{trg}.{model}.seed{seed}.{quantization}.{test}.tsv"
    threads: data_threads(8)
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate.py"


# Time the decoding of every row of the distillation table (the teacher's and the students' test-set translations)
# alone on the machine: each row's `python -m nmt translate` with its search and the decoding jobs' threads, in a
# fresh process, every row in turn, `repeats` rounds; the output must be the row's translation. The job asks for
# every core (--cores): Snakemake starts it only when no other job runs, and starts none beside it, which a resource
# that every timed job holds would also do but only among the timed jobs, not beside a training. The decoding jobs'
# own benchmarks run beside whatever else runs, so the table does not read them.
rule time_distillation:
    input:
        unpack(get_distillation_files),
    output:
        timing="results/tables/distillation_timing.json",
    params:
        rows=get_distillation_rows,
        repeats=get_timing_repeats,
        threads=data_threads(8),
    log:
        "results/logs/time_distillation/time_distillation.log",
    threads: get_timing_threads
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/time_distillation.py"


# Teacher and students in one table per pair and test set: BLEU/chrF/TER with significance against the teacher (and
# of each distilled student against the same student on the original pairs), sentences per second of the whole
# decoding process as time_distillation measured it, model size on disk; and a plot of quality against speed.
rule tabulate_distillation:
    input:
        unpack(get_distillation_files),
        timing="results/tables/distillation_timing.json",
    output:
        csv="results/tables/distillation.csv",
        md="results/tables/distillation.md",
        png=report(
            "results/plots/distillation.png",
            caption="../report/distillation.rst",
            category="Results",
            labels={"table": "5. distillation: quality, speed and size"},
        ),
    params:
        rows=get_distillation_rows,
        n_samples=EXPERIMENT.tables.bootstrap_samples,
        seed=EXPERIMENT.tables.bootstrap_seed,
    log:
        "results/logs/tabulate_distillation/tabulate_distillation.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/tabulate_distillation.py"
