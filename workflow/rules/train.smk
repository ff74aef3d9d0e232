# Training stage: one model per pair, config["models"] entry, stage (baseline or BT variant) and seed.


# Train a model on the binarized parallel data; resumes from its last checkpoint when re-run.
rule train_model:
    input:
        data=multiext("results/{src}-{trg}/data/bin/{stage}/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
        dev_src=get_corpus_files("dev", "src"),
        dev_ref=get_corpus_files("dev", "trg"),
        src_spm="results/{src}-{trg}/subword/{src}.model",
        trg_spm="results/{src}-{trg}/subword/{trg}.model",
        init=ask(EXPERIMENT.init_files, "model"),
    output:
        model="results/{src}-{trg}/{model}/{stage}/seed{seed}/model/model.pt",
        summary="results/{src}-{trg}/{model}/{stage}/seed{seed}/model/summary.json",
        meta="results/{src}-{trg}/{model}/{stage}/seed{seed}/model/meta.json",
    params:
        train_data=get_data_prefix,
        model=ask(EXPERIMENT.model_settings, "model"),
        training=get_training,
        meta=ask(EXPERIMENT.model_meta, "src", "trg", "stage"),
    log:
        "results/logs/train_model/{src}-{trg}.{model}.{stage}.seed{seed}.log",
    benchmark:
        "results/benchmarks/train_model/{src}-{trg}.{model}.{stage}.seed{seed}.tsv"
    threads: training_threads(get_training)
    priority: lambda wildcards: 0 if wildcards.stage == BASELINE else 5  # back-translation systems end the critical path
    resources:
        mem_mb=per_attempt(16000),
        runtime=per_attempt(480),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_model.py"
