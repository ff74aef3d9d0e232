# Evaluation stage: translate the test sets, score them, test significance, collect tables and plots.


# Scoring, tabulating and plotting take seconds: on a cluster they run where Snakemake runs instead of queueing.
localrules:
    score_translations,
    collect_scores,
    plot_learning_curves,
    plot_comparison,


# Export a trained Transformer's model directory to CTranslate2 with one weight type (float32, int8), once: every
# job that decodes with the model in CTranslate2 reads it (decoding_files), the test sets', back-translation's and the
# teacher's, and the distillation table's students.
rule export_model:
    input:
        model="results/{path}/model.pt",
    output:
        model="results/{path}/ctranslate2/{quantization}/model.bin",
    log:
        "results/logs/export_model/{path}.{quantization}.log",
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(30),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/export_model.py"


# Translate one test set with one run's model (or the ensemble of all seeds' models; or its CTranslate2 export, when
# runtime auto picks CTranslate2), detokenize, and record the device and precision that decoded it.
rule translate_test:
    input:
        models=get_test_models,
        src="results/{src}-{trg}/data/eval/{test}.{src}",
    output:
        hyp="results/{src}-{trg}/{model}/{stage}/{run}/translations/{test}.{trg}",
        decoding="results/{src}-{trg}/{model}/{stage}/{run}/translations/{test}.{trg}.json",
    params:
        decoding=ask(EXPERIMENT.test_decoding, "model"),
        device=get_decoding_device,
        bf16=get_decoding_bf16,
    log:
        "results/logs/translate_test/{src}-{trg}.{model}.{stage}.{run}.{test}.log",
    benchmark:
        "results/benchmarks/translate_test/{src}-{trg}.{model}.{stage}.{run}.{test}.tsv"
    threads: data_threads(8)
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate.py"


# Score one translation with sacrebleu (BLEU, chrF, TER; BLEU against the official tokenized reference where the test
# set has one) and attach the training facts.
rule score_translations:
    input:
        hyp="results/{src}-{trg}/{model}/{stage}/{run}/translations/{test}.{trg}",
        ref="results/{src}-{trg}/data/eval/{test}.{trg}",
        tok_ref=get_tokenized_ref,
        summaries=get_run_files("summary.json"),
    output:
        scores="results/{src}-{trg}/{model}/{stage}/{run}/scores/{test}.json",
    params:
        system=get_system,
    log:
        "results/logs/score_translations/{src}-{trg}.{model}.{stage}.{run}.{test}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/score_translations.py"


# Paired bootstrap resampling (sacrebleu) of every run against the baseline system's first seed.
rule compute_significance:
    input:
        ref="results/{src}-{trg}/data/eval/{test}.{trg}",
        hyps=get_significance_hyps,
    output:
        tests="results/{src}-{trg}/significance/{test}.json",
    params:
        # Named, since Snakemake compares inputs as a sorted list: a new baseline may only reorder them.
        systems=get_significance_systems,
        baseline=get_significance_baseline,
        n_samples=EXPERIMENT.tables.bootstrap_samples,
        seed=EXPERIMENT.tables.bootstrap_seed,
    log:
        "results/logs/compute_significance/{src}-{trg}.{test}.log",
    benchmark:
        "results/benchmarks/compute_significance/{src}-{trg}.{test}.tsv"
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/compute_significance.py"


# Collect every score into the tables: long (every run, with the device that decoded it), per system (mean ± std over
# seeds), and the wide table of papers (systems x language pairs and metrics, significance marks, published figures);
# remove the tables and figures of systems no longer configured.
rule collect_scores:
    input:
        scores=score_records(),
        tests=expand("results/{pair}/significance/{test}.json", pair=EXPERIMENT.eval_pairs, test=EXPERIMENT.data.test),
        decodings=decoding_records(),
    output:
        csv="results/tables/scores.csv",
        md="results/tables/scores.md",
        summary="results/tables/summary.csv",
        wide_md="results/tables/table.md",
        wide_tex="results/tables/table.tex",
        wide_csv="results/tables/table.csv",
        # The tables as HTML pages, which Snakemake's report shows on the page (a CSV would be a download link).
        table_html=report(
            "results/tables/table.html",
            caption="../report/table.rst",
            category="Results",
            labels={"table": "1. main results: systems x pairs (as in papers)"},
        ),
        summary_html=report(
            "results/tables/summary.html",
            caption="../report/summary.rst",
            category="Results",
            labels={"table": "2. per system, mean ± std over seeds"},
        ),
        scores_html=report(
            "results/tables/scores.html",
            caption="../report/scores.rst",
            category="Results",
            labels={"table": "3. every run (long)"},
        ),
        significance_html=report(
            "results/tables/significance.html",
            caption="../report/significance.rst",
            category="Results",
            labels={"table": "4. significance against the baseline"},
        ),
    params:
        tables=plain(EXPERIMENT.tables),
        # What the config makes: figures of other systems, and the distillation results when it is off, are removed.
        plots=system_plots(),
        distillation=bool(KD),
        # Cost columns (models trained, training minutes, pairs sharing a model) where systems differ in them.
        costs=bool(ML.systems or ML.pivots),
    log:
        "results/logs/collect_scores/collect_scores.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/collect_scores.py"


# Learning curves of one seed of a system: train loss, dev loss and dev BLEU per update, with a note on the losses.
rule plot_learning_curves:
    input:
        summary="results/{src}-{trg}/{model}/{stage}/seed{seed}/model/summary.json",
    output:
        png=report(
            "results/plots/{src}-{trg}.{model}.{stage}.seed{seed}.png",
            caption="../report/learning_curves.rst",
            category="Learning curves",
            subcategory="{src}-{trg}",
            labels={"model": "{model}", "stage": "{stage}", "seed": "{seed}"},
        ),
    params:
        label_smoothing=get_label_smoothing,
    log:
        "results/logs/plot_learning_curves/{src}-{trg}.{model}.{stage}.seed{seed}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/plot_learning_curves.py"


# One figure comparing the systems of a pair (first seed): dev BLEU per update and per training minute, train loss.
rule plot_comparison:
    input:
        summaries=expand(
            "results/{{src}}-{{trg}}/{system.model}/{system.stage}/seed{seed}/model/summary.json",
            system=EXPERIMENT.systems,
            seed=EXPERIMENT.seeds[0],
        ),
    output:
        png=report(
            "results/plots/{src}-{trg}.comparison.png",
            caption="../report/comparison.rst",
            category="Learning curves",
            subcategory="{src}-{trg}",
            labels={"model": "all systems", "stage": "comparison", "seed": str(EXPERIMENT.seeds[0])},
        ),
    params:
        labels=[f"{system.model}/{system.stage}" for system in EXPERIMENT.systems],
        seed=EXPERIMENT.seeds[0],
    log:
        "results/logs/plot_comparison/{src}-{trg}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/plot_comparison.py"
