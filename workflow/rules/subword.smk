# Subword stage: sentencepiece models learned on the cleaned training data.


# Learn the source and target subword models of a pair (one joint model copied to both by default).
rule train_subword:
    input:
        src=get_corpus_files("train", "src"),
        trg=get_corpus_files("train", "trg"),
    output:
        src="results/{src}-{trg}/subword/{src}.model",
        trg="results/{src}-{trg}/subword/{trg}.model",
    params:
        subword=plain(EXPERIMENT.subword),
    log:
        "results/logs/train_subword/{src}-{trg}.log",
    threads: data_threads(2)  # beside running trainings when they have threads (another pair's, a multilingual model)
    # sentencepiece holds its sample of input_sentence_size sentences in memory (benchmarks/README.md,
    # "Rehearsal at WMT scale": a few GB at the WMT presets' sample).
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_subword.py"
