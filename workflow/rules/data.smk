# Data stage: download corpora, clean the training data, prepare dev/test sets.


localrules:
    download_corpus,


# Download one language of one corpus (runs where the internet is: a local rule on clusters).
rule download_corpus:
    output:
        data="results/data/download/{corpus}.{lang}",
        manifest="results/data/download/{corpus}.{lang}.manifest.json",
    params:
        url=get_url,
        sha256=get_sha256,
    log:
        "results/logs/download_corpus/{corpus}.{lang}.log",
    retries: 0
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/download_corpus.py"


# Clean one training corpus of a pair: normalize, filter, deduplicate; keep the sides aligned.
rule clean_corpus:
    input:
        src="results/data/download/{corpus}.{src}",
        trg="results/data/download/{corpus}.{trg}",
    output:
        src="results/{src}-{trg}/data/clean/{corpus}.{src}",
        trg="results/{src}-{trg}/data/clean/{corpus}.{trg}",
        report="results/{src}-{trg}/data/clean/{corpus}.report.json",
    params:
        cleaning=CLEANING,
    log:
        "results/logs/clean_corpus/{src}-{trg}.{corpus}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/clean_corpus.py"


# Prepare a dev or test set: normalize the source like the training data, keep the reference verbatim.
rule prepare_eval_set:
    input:
        src="results/data/download/{corpus}.{src}",
        ref="results/data/download/{corpus}.{trg}",
    output:
        src="results/{src}-{trg}/data/eval/{corpus}.{src}",
        ref="results/{src}-{trg}/data/eval/{corpus}.{trg}",
    params:
        punctuation=CLEANING.normalize_punctuation,
    log:
        "results/logs/prepare_eval_set/{src}-{trg}.{corpus}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/prepare_eval_set.py"
