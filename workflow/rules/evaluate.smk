# Evaluation stage: translate the test sets, score them, collect the result table.


# Scoring and tabulating take seconds: on a cluster they run where Snakemake runs instead of queueing.
localrules:
    score_translations,
    collect_scores,


# Translate one test set with beam search (or greedy) and detokenize.
rule translate_test:
    input:
        model="results/{src}-{trg}/{model}/{stage}/model/model.pt",
        src="results/{src}-{trg}/data/eval/{test}.{src}",
    output:
        hyp="results/{src}-{trg}/{model}/{stage}/translations/{test}.{trg}",
    params:
        decoding=DECODING,
    log:
        "results/logs/translate_test/{src}-{trg}.{model}.{stage}.{test}.log",
    benchmark:
        "results/benchmarks/translate_test/{src}-{trg}.{model}.{stage}.{test}.tsv"
    threads: 8
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate_test.py"


# Score one translation with sacrebleu (BLEU, chrF, TER) and attach the training facts.
rule score_translations:
    input:
        hyp="results/{src}-{trg}/{model}/{stage}/translations/{test}.{trg}",
        ref="results/{src}-{trg}/data/eval/{test}.{trg}",
        summary="results/{src}-{trg}/{model}/{stage}/model/summary.json",
    output:
        scores="results/{src}-{trg}/{model}/{stage}/scores/{test}.json",
    params:
        system=get_system,
    log:
        "results/logs/score_translations/{src}-{trg}.{model}.{stage}.{test}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/score_translations.py"


# Collect every score into the result tables (CSV and Markdown).
rule collect_scores:
    input:
        scores=get_score_files(),
    output:
        csv="results/tables/scores.csv",
        md="results/tables/scores.md",
    log:
        "results/logs/collect_scores/collect_scores.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/collect_scores.py"
