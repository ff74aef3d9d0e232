# Back-translation stage: clean target-language monolingual text, train the reverse model, translate
# the text in parts (a checkpoint splits it, so a cluster can fan the parts out), and build the
# synthetic corpus of each variant. train_model then trains the {stage}={variant} systems on it and the real data.
# With backtranslation.iterations >= 2, each later round of a variant (its files in {variant}/round{round}/) trains
# a forward model, translates the source-language text with it, trains a new reverse model on those pairs reversed,
# and back-translates again; the systems train on the last round's corpus.


# Writing the reports as HTML pages or tables takes a second: on a cluster it runs where Snakemake runs.
localrules:
    render_mono_report,
    render_synthetic_report,
    tabulate_rounds,


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
        sentence_form=BT.sentence_form,
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


# Back-translate one part with the reverse model (beam, greedy or sampling, per variant; CTranslate2: its export).
rule backtranslate_part:
    input:
        models=get_generation_models("results/{src}-{trg}/backtranslation/reverse/model.pt"),
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


# Clean the monolingual corpora's source-language side into one sample for the forward models of the later rounds: as
# the target side, and without the training corpora's source sentences (a forward model would translate them into
# its own training targets).
use rule clean_monolingual as clean_source_monolingual with:
    input:
        mono=expand("results/data/download/{corpus}.{{src}}", corpus=EXPERIMENT.data.mono),
        exclude=expand("results/{{src}}-{{trg}}/data/eval/{corpus}.{{src}}", corpus=EXPERIMENT.data.eval_sets),
        train=get_corpus_files("train", "src"),
    output:
        mono="results/{src}-{trg}/data/mono/mono.{src}",
        report="results/{src}-{trg}/data/mono/mono.{src}.report.json",
    params:
        sources=ask(EXPERIMENT.mono_sources, "src"),
    log:
        "results/logs/clean_source_monolingual/{src}-{trg}.log",


# Cut the source-language sample into parts of chunk_lines lines, as split_monolingual the target-language one (written
# out: `use rule` would make a rule of it, not a checkpoint).
checkpoint split_source_monolingual:
    input:
        mono="results/{src}-{trg}/data/mono/mono.{src}",
    output:
        parts=directory("results/{src}-{trg}/backtranslation/source_parts"),
    params:
        chunk_lines=BT.chunk_lines,
    log:
        "results/logs/split_source_monolingual/{src}-{trg}.log",
    priority: 10
    resources:
        mem_mb=per_attempt(1000),
        runtime=per_attempt(15),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/split_monolingual.py"


# Train a later round's forward (source->target) or reverse model with the reverse model's settings, on the real
# corpora and a synthetic corpus of the variant (get_round_files: the previous round's, or this round's forward one).
rule train_round_model:
    input:
        data=multiext("results/{src}-{trg}/data/bin/{variant}/round{round}/{direction}/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
        dev_src=get_round_files("dev", "src"),
        dev_ref=get_round_files("dev", "trg"),
        src_spm=get_round_files("subword", "src"),
        trg_spm=get_round_files("subword", "trg"),
    output:
        model="results/{src}-{trg}/backtranslation/{variant}/round{round}/{direction}/model.pt",
        summary="results/{src}-{trg}/backtranslation/{variant}/round{round}/{direction}/summary.json",
        meta="results/{src}-{trg}/backtranslation/{variant}/round{round}/{direction}/meta.json",
    params:
        train_data=get_data_prefix,
        model=BT.reverse.settings,
        training=get_round_training,
        meta=get_round_meta,
    log:
        "results/logs/train_round_model/{src}-{trg}.{variant}.round{round}.{direction}.log",
    benchmark:
        "results/benchmarks/train_round_model/{src}-{trg}.{variant}.round{round}.{direction}.tsv"
    threads: training_threads(get_round_training)
    priority: 10  # as the first reverse model's: the back-translation systems wait for it
    resources:
        mem_mb=per_attempt(16000),
        runtime=per_attempt(480),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_model.py"


# Translate one part of the source-language sample with a later round's forward model (the variant's search).
use rule backtranslate_part as forward_translate_part with:
    input:
        models=get_generation_models("results/{src}-{trg}/backtranslation/{variant}/round{round}/forward/model.pt"),
        src="results/{src}-{trg}/backtranslation/source_parts/{part}.{src}",
    output:
        hyp="results/{src}-{trg}/backtranslation/{variant}/round{round}/forward_corpus/parts/{part}.{trg}",
    log:
        "results/logs/forward_translate_part/{src}-{trg}.{variant}.round{round}.{part}.log",
    benchmark:
        "results/benchmarks/forward_translate_part/{src}-{trg}.{variant}.round{round}.{part}.tsv"


# The forward translations with their source-language sentences, filtered and tagged as the variant says, in the
# direction of the round's reverse model (the translations are its sources): its synthetic corpus.
use rule build_synthetic_corpus as build_forward_corpus with:
    input:
        unpack(get_forward_parts),
        real_src=get_corpus_files("train", "trg"),
        real_trg=get_corpus_files("train", "src"),
    output:
        src="results/{src}-{trg}/backtranslation/{variant}/round{round}/forward_corpus/synthetic.{trg}",
        trg="results/{src}-{trg}/backtranslation/{variant}/round{round}/forward_corpus/synthetic.{src}",
        report="results/{src}-{trg}/backtranslation/{variant}/round{round}/forward_corpus/report.json",
    log:
        "results/logs/build_forward_corpus/{src}-{trg}.{variant}.round{round}.log",


# Back-translate one part of the target-language sample again, with a later round's reverse model.
use rule backtranslate_part as backtranslate_round_part with:
    input:
        models=get_generation_models("results/{src}-{trg}/backtranslation/{variant}/round{round}/reverse/model.pt"),
        src="results/{src}-{trg}/backtranslation/parts/{part}.{trg}",
    output:
        hyp="results/{src}-{trg}/backtranslation/{variant}/round{round}/parts/{part}.{src}",
    log:
        "results/logs/backtranslate_round_part/{src}-{trg}.{variant}.round{round}.{part}.log",
    benchmark:
        "results/benchmarks/backtranslate_round_part/{src}-{trg}.{variant}.round{round}.{part}.tsv"


# A later round's synthetic corpus, built as round 1's from its back-translations.
use rule build_synthetic_corpus as build_round_corpus with:
    output:
        src="results/{src}-{trg}/backtranslation/{variant}/round{round}/synthetic.{src}",
        trg="results/{src}-{trg}/backtranslation/{variant}/round{round}/synthetic.{trg}",
        report="results/{src}-{trg}/backtranslation/{variant}/round{round}/report.json",
    log:
        "results/logs/build_round_corpus/{src}-{trg}.{variant}.round{round}.log",


# Each round of a variant in one table: its reverse and forward models' dev BLEU, its corpora's sizes.
rule tabulate_rounds:
    input:
        unpack(get_round_reports),
    output:
        json="results/{src}-{trg}/backtranslation/{variant}/rounds.json",
        md="results/{src}-{trg}/backtranslation/{variant}/rounds.md",
    log:
        "results/logs/tabulate_rounds/{src}-{trg}.{variant}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/tabulate_rounds.py"


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
