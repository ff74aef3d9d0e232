# Back-translation stage: clean target-language monolingual text, train the reverse model, translate
# the text in parts (a checkpoint splits it, so a cluster can fan the parts out), and build the
# synthetic corpus of each variant. train_model then trains the {stage}={variant} systems on it and the real data.


# Writing the reports as HTML pages takes a second: on a cluster it runs where Snakemake runs.
localrules:
    render_mono_report,
    render_synthetic_report,


# Clean the monolingual corpora of the target language into one sample, without dev/test sentences.
rule clean_monolingual:
    input:
        mono=expand("results/data/download/{corpus}.{{trg}}", corpus=EXPERIMENT.data.mono),
        exclude=expand("results/{{src}}-{{trg}}/data/eval/{corpus}.{{trg}}", corpus=EXPERIMENT.data.eval_sets),
    output:
        mono="results/{src}-{trg}/data/mono/mono.{trg}",
        report="results/{src}-{trg}/data/mono/mono.report.json",
    params:
        cleaning=plain(EXPERIMENT.cleaning),
        max_sentences=BT.max_sentences,
        seed=BT.seed,
        sources=ask(EXPERIMENT.mono_sources, "trg"),
    log:
        "results/logs/clean_monolingual/{src}-{trg}.log",
    priority: 10  # the reverse model joins the jobs only after split_monolingual, a checkpoint, has run
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/clean_monolingual.py"


# Train the target->source model on the cleaned parallel data, reversed, with the pair's subword models.
rule train_reverse_model:
    input:
        data=multiext("results/{src}-{trg}/data/bin/reverse/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
        dev_src=get_corpus_files("dev", "trg"),
        dev_ref=get_corpus_files("dev", "src"),
        src_spm="results/{src}-{trg}/subword/{trg}.model",
        trg_spm="results/{src}-{trg}/subword/{src}.model",
    output:
        model="results/{src}-{trg}/backtranslation/reverse/model.pt",
        summary="results/{src}-{trg}/backtranslation/reverse/summary.json",
        meta="results/{src}-{trg}/backtranslation/reverse/meta.json",
    params:
        train_data=get_data_prefix,
        model=BT.reverse.settings,
        training=get_reverse_training,
        meta=ask(EXPERIMENT.reverse_meta, "src", "trg"),
    log:
        "results/logs/train_reverse_model/{src}-{trg}.log",
    benchmark:
        "results/benchmarks/train_reverse_model/{src}-{trg}.tsv"
    threads: training_threads(get_reverse_training)
    priority: 10  # the back-translation systems wait for it: it starts before the other trainings
    resources:
        mem_mb=per_attempt(16000),
        runtime=per_attempt(480),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_model.py"


# Cut the monolingual text into parts of chunk_lines lines; their number is known only afterwards.
checkpoint split_monolingual:
    input:
        mono="results/{src}-{trg}/data/mono/mono.{trg}",
    output:
        parts=directory("results/{src}-{trg}/backtranslation/parts"),
    params:
        chunk_lines=BT.chunk_lines,
    log:
        "results/logs/split_monolingual/{src}-{trg}.log",
    priority: 10
    resources:
        mem_mb=per_attempt(1000),
        runtime=per_attempt(15),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/split_monolingual.py"


# Back-translate one part with the reverse model (beam, greedy or sampling, per variant).
rule backtranslate_part:
    input:
        models=["results/{src}-{trg}/backtranslation/reverse/model.pt"],
        src="results/{src}-{trg}/backtranslation/parts/{part}.{trg}",
    output:
        hyp="results/{src}-{trg}/backtranslation/{variant}/parts/{part}.{src}",
    params:
        decoding=ask(EXPERIMENT.generation, "variant", "part"),
    log:
        "results/logs/backtranslate_part/{src}-{trg}.{variant}.{part}.log",
    benchmark:
        "results/benchmarks/backtranslate_part/{src}-{trg}.{variant}.{part}.tsv"
    threads: training_threads(get_reverse_training)  # the reverse model's jobs run on as many threads as it trains on
    priority: 10
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(120),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate.py"


# Merge the parts, filter degenerate synthetic pairs and tag them: the synthetic corpus, which the variant's
# systems train on beside the real corpora (weighted by upsample_real, or mixed per batch by training stages).
rule build_synthetic_corpus:
    input:
        unpack(get_bt_parts),
        real_src=get_corpus_files("train", "src"),
        real_trg=get_corpus_files("train", "trg"),
    output:
        src="results/{src}-{trg}/backtranslation/{variant}/synthetic.{src}",
        trg="results/{src}-{trg}/backtranslation/{variant}/synthetic.{trg}",
        report="results/{src}-{trg}/backtranslation/{variant}/report.json",
    params:
        synthetic=ask(EXPERIMENT.synthetic, "variant"),
        seed=BT.seed,
    log:
        "results/logs/build_synthetic_corpus/{src}-{trg}.{variant}.log",
    priority: 10
    resources:
        mem_mb=per_attempt(4000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/build_synthetic_corpus.py"


# The monolingual cleaning report as an HTML page, which Snakemake's report shows on the page.
rule render_mono_report:
    input:
        report="results/{src}-{trg}/data/mono/mono.report.json",
    output:
        html=report(
            "results/{src}-{trg}/data/mono/mono.report.html",
            caption="../report/mono.rst",
            category="Back-translation",
            subcategory="{src}-{trg}",
            labels={"report": "monolingual cleaning", "variant": "all"},
        ),
    log:
        "results/logs/render_mono_report/{src}-{trg}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/render_mono_report.py"


# A variant's back-translation report as an HTML page, which Snakemake's report shows on the page.
rule render_synthetic_report:
    input:
        report="results/{src}-{trg}/backtranslation/{variant}/report.json",
    output:
        html=report(
            "results/{src}-{trg}/backtranslation/{variant}/report.html",
            caption="../report/synthetic.rst",
            category="Back-translation",
            subcategory="{src}-{trg}",
            labels={"report": "synthetic corpus", "variant": "{variant}"},
        ),
    log:
        "results/logs/render_synthetic_report/{src}-{trg}.{variant}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/render_synthetic_report.py"
