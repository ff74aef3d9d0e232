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
        subword=SUBWORD,
    log:
        "results/logs/train_subword/{src}-{trg}.log",
    threads: 2
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_subword.py"
