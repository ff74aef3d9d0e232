# Binarize stage: each training set is encoded once into memory-mapped token ids (nmt/data/binarize.py) that
# every training process of every model and seed on it maps read-only.


# Encode a stage's training data (the cleaned corpora, or a variant's real + synthetic corpus).
rule binarize_corpus:
    input:
        src=get_corpus_files("train", "src"),
        trg=get_corpus_files("train", "trg"),
        src_spm="results/{src}-{trg}/subword/{src}.model",
        trg_spm="results/{src}-{trg}/subword/{trg}.model",
    output:
        data=multiext("results/{src}-{trg}/data/bin/{stage}/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
    params:
        prefix=get_data_prefix,
        max_length=ask(EXPERIMENT.train_max_length, "stage"),
        order=get_corpus_files("train", "src"),  # Snakemake compares inputs as a set: the files' order reruns it
    log:
        "results/logs/binarize_corpus/{src}-{trg}.{stage}.log",
    threads: data_threads(4)
    priority: 10  # seconds of work that trainings wait for: before any training (the reverse model's too)
    resources:
        mem_mb=per_attempt(2000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/binarize_corpus.py"


# Encode the cleaned corpora reversed (target -> source), for the back-translation model.
rule binarize_reverse_corpus:
    input:
        src=get_corpus_files("train", "trg"),
        trg=get_corpus_files("train", "src"),
        src_spm="results/{src}-{trg}/subword/{trg}.model",
        trg_spm="results/{src}-{trg}/subword/{src}.model",
    output:
        data=multiext("results/{src}-{trg}/data/bin/reverse/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
    params:
        prefix=get_data_prefix,
        max_length=BT.reverse.training.max_length,
        order=get_corpus_files("train", "trg"),  # Snakemake compares inputs as a set: the files' order reruns it
    log:
        "results/logs/binarize_reverse_corpus/{src}-{trg}.log",
    threads: data_threads(4)
    priority: 10  # seconds of work that trainings wait for: before any training (the reverse model's too)
    resources:
        mem_mb=per_attempt(2000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/binarize_corpus.py"


# Encode a later round's forward or reverse model's training data in its direction (get_round_files).
use rule binarize_reverse_corpus as binarize_round_corpus with:
    input:
        src=get_round_files("train", "src"),
        trg=get_round_files("train", "trg"),
        src_spm=get_round_files("subword", "src"),
        trg_spm=get_round_files("subword", "trg"),
    output:
        data=multiext("results/{src}-{trg}/data/bin/{variant}/round{round}/{direction}/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
    params:
        order=get_round_files("train", "src"),
    log:
        "results/logs/binarize_round_corpus/{src}-{trg}.{variant}.round{round}.{direction}.log",
