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
        subword=EXPERIMENT.subword,
    log:
        "results/logs/train_subword/{src}-{trg}.log",
    threads: 2
    # sentencepiece holds its sample of input_sentence_size sentences: about 470 MB per million WMT-length
    # sentences (benchmarks/scale.py: 3.2 GB at the WMT presets' 6M, 4.7 GB at 10M).
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_subword.py"
