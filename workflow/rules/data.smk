# Data stage: download corpora, clean the training data, prepare dev/test sets.


localrules:
    fetch_archive,
    download_corpus,
    download_tokenized_ref,
    render_cleaning_report,


# Fetch the one file that holds all languages of a corpus: a zip/tar archive, a TSV file, an OPUS zip.
rule fetch_archive:
    input:
        local=get_local_file,
    output:
        archive="results/data/archive/{corpus}",
        manifest="results/data/archive/{corpus}.manifest.json",
    params:
        corpus=get_corpus_settings,
    log:
        "results/logs/fetch_archive/{corpus}.log",
    retries: 0
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/fetch_archive.py"


# Import one language of one corpus by its importer: url, local, opus or sacrebleu (runs where the
# internet is: a local rule on clusters).
rule download_corpus:
    input:
        archive=get_archive,
        local=get_local_file,
    output:
        data="results/data/download/{corpus}.{lang}",
        manifest="results/data/download/{corpus}.{lang}.manifest.json",
    params:
        corpus=get_corpus_settings,
        sacrebleu_dir="results/data/sacrebleu",
    log:
        "results/logs/download_corpus/{corpus}.{lang}.log",
    retries: 0
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/download_corpus.py"


# Fetch a test set's official tokenized reference in one language (corpora.NAME.tokenized_ref), which BLEU is scored
# against as the test set's literature scores it.
rule download_tokenized_ref:
    output:
        ref="results/data/tokenized_ref/{corpus}.{lang}",
        manifest="results/data/tokenized_ref/{corpus}.{lang}.manifest.json",
    params:
        source=get_tokenized_ref_source,
    log:
        "results/logs/download_tokenized_ref/{corpus}.{lang}.log",
    retries: 0
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/download_tokenized_ref.py"


# Clean one training corpus of a pair (the cleaning section, with the corpus's own cleaning keys): normalize, filter,
# decontaminate, deduplicate; keep the sides aligned.
rule clean_corpus:
    input:
        src="results/data/download/{corpus}.{src}",
        trg="results/data/download/{corpus}.{trg}",
        exclude=get_eval_files,
    output:
        src="results/{src}-{trg}/data/clean/{corpus}.{src}",
        trg="results/{src}-{trg}/data/clean/{corpus}.{trg}",
        report="results/{src}-{trg}/data/clean/{corpus}.report.tsv",
        summary="results/{src}-{trg}/data/clean/{corpus}.report.md",
    params:
        cleaning=get_cleaning,
        sources=get_corpus_sources,
    log:
        "results/logs/clean_corpus/{src}-{trg}.{corpus}.log",
    benchmark:
        "results/benchmarks/clean_corpus/{src}-{trg}.{corpus}.tsv"
    threads: 8
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(240),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/clean_corpus.py"


# The cleaning report of a training corpus as an HTML page, which Snakemake's report shows on the page.
rule render_cleaning_report:
    input:
        report="results/{src}-{trg}/data/clean/{corpus}.report.tsv",
    output:
        html=report(
            "results/{src}-{trg}/data/clean/{corpus}.report.html",
            caption="../report/cleaning.rst",
            category="Data",
            subcategory="{src}-{trg}",
            labels={"corpus": "{corpus}", "report": "cleaning"},
        ),
    params:
        cleaning=get_cleaning,
    log:
        "results/logs/render_cleaning_report/{src}-{trg}.{corpus}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/render_cleaning_report.py"


# Prepare a dev or test set: normalize the source like the training data, keep the reference verbatim.
rule prepare_eval_set:
    input:
        src=get_download("src"),
        ref=get_download("trg"),
    output:
        src="results/{src}-{trg}/data/eval/{corpus}.{src}",
        ref="results/{src}-{trg}/data/eval/{corpus}.{trg}",
    params:
        punctuation=EXPERIMENT.cleaning.normalize_punctuation,
        sources=get_corpus_sources,
    log:
        "results/logs/prepare_eval_set/{src}-{trg}.{corpus}.log",
    resources:
        mem_mb=per_attempt(1000),
        runtime=per_attempt(15),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/prepare_eval_set.py"
