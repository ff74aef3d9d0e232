# Multilingual stage: systems of many languages as rows of each pair's group. A multilingual model (Johnson et al. 2017)
# trains on the tagged corpora of its directions with one joint subword model and translates the test sets of its
# directions and zero-shot directions ({kind} multilingual or zero_shot); a pivot cascade translates a pair's test
# sets with two bilingual models, keeping the translation into the pivot language.


# One direction's training corpora (the cleaned corpora of its pair, or of its reverse read the other way) in one
# file per side, every source with the tag of the target language; shared by the systems that train on it.
rule tag_corpus:
    input:
        src=get_direction_files("src"),
        trg=get_direction_files("trg"),
    output:
        src="results/multilingual/data/train/{src}-{trg}.{src}",
        trg="results/multilingual/data/train/{src}-{trg}.{trg}",
    params:
        trg_langs=get_direction_tags,
    log:
        "results/logs/tag_corpus/{src}-{trg}.log",
    resources:
        mem_mb=per_attempt(1000),
        runtime=per_attempt(30),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/tag_corpus.py"


# A system's dev set: the dev set of each of its directions, tagged, one after the other.
use rule tag_corpus as tag_dev_set with:
    input:
        src=get_system_dev("src"),
        trg=get_system_dev("trg"),
    output:
        src="results/multilingual/{system}/data/dev.src",
        trg="results/multilingual/{system}/data/dev.trg",
    params:
        trg_langs=get_system_dev_tags,
    log:
        "results/logs/tag_dev_set/{system}.log",


# Learn a system's joint subword model on the text of each of its languages (once each), with its target-language
# tags as pieces.
rule train_multilingual_subword:
    input:
        texts=get_system_texts,
    output:
        model="results/multilingual/{system}/subword/joint.model",
    params:
        subword=get_multilingual_subword,
        tags=get_system_tags,
    log:
        "results/logs/train_multilingual_subword/{system}.log",
    threads: data_threads(2)
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_multilingual_subword.py"


# Encode a system's tagged training corpora, a corpus per direction (its training draws them by temperature).
use rule binarize_reverse_corpus as binarize_multilingual_corpus with:
    input:
        src=get_system_train("src"),
        trg=get_system_train("trg"),
        src_spm="results/multilingual/{system}/subword/joint.model",
        trg_spm="results/multilingual/{system}/subword/joint.model",
    output:
        data=multiext("results/multilingual/{system}/data/bin/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
    params:
        max_length=get_multilingual_max_length,
        order=get_system_train("src"),
    log:
        "results/logs/binarize_multilingual_corpus/{system}.log",


# Train one seed of a multilingual system as train_model trains a bilingual model (resumes, reruns, faults alike).
rule train_multilingual_model:
    input:
        data=multiext("results/multilingual/{system}/data/bin/train", ".json", ".src.ids", ".src.offsets", ".trg.ids", ".trg.offsets"),
        dev_src="results/multilingual/{system}/data/dev.src",
        dev_ref="results/multilingual/{system}/data/dev.trg",
        src_spm="results/multilingual/{system}/subword/joint.model",
        trg_spm="results/multilingual/{system}/subword/joint.model",
    output:
        model="results/multilingual/{system}/seed{seed}/model/model.pt",
        summary="results/multilingual/{system}/seed{seed}/model/summary.json",
        meta="results/multilingual/{system}/seed{seed}/model/meta.json",
    params:
        train_data=get_data_prefix,
        model=get_multilingual_model_settings,
        training=get_multilingual_training,
        meta=get_multilingual_meta,
    log:
        "results/logs/train_multilingual_model/{system}.seed{seed}.log",
    benchmark:
        "results/benchmarks/train_multilingual_model/{system}.seed{seed}.tsv"
    threads: training_threads(get_multilingual_training)
    priority: 5  # the longest trainings: start them first
    resources:
        mem_mb=per_attempt(16000),
        runtime=per_attempt(480),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/train_model.py"


# The dev BLEU and chrF of one seed's final model in each direction it translates, trained and zero-shot.
rule score_directions:
    input:
        models=["results/multilingual/{system}/seed{seed}/model/model.pt"],
        srcs=get_direction_dev("src"),
        refs=get_direction_dev("trg"),
    output:
        json="results/multilingual/{system}/seed{seed}/directions.json",
        md="results/multilingual/{system}/seed{seed}/directions.md",
    params:
        directions=get_served_directions,
        zero_shot=get_zero_shot_directions,
        training=get_multilingual_training,
    log:
        "results/logs/score_directions/{system}.seed{seed}.log",
    threads: data_threads(8)
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/score_directions.py"


# Translate a test set of a pair with a multilingual model (its seed's, or every seed's as an ensemble): a direction
# it trained on (multilingual) or not (zero_shot), the target language's tag first on every source.
rule translate_multilingual:
    input:
        models=get_system_run_files("model.pt"),
        src="results/{src}-{trg}/data/eval/{test}.{src}",
    output:
        hyp="results/{src}-{trg}/{system}/{kind}/{run}/translations/{test}.{trg}",
        decoding="results/{src}-{trg}/{system}/{kind}/{run}/translations/{test}.{trg}.json",
    params:
        decoding=plain(EXPERIMENT.decoding),
        device=get_multilingual_device,
        bf16=get_multilingual_bf16,
        trg_lang=get_trg_lang,
    log:
        "results/logs/translate_multilingual/{src}-{trg}.{system}.{kind}.{run}.{test}.log",
    benchmark:
        "results/benchmarks/translate_multilingual/{src}-{trg}.{system}.{kind}.{run}.{test}.tsv"
    threads: data_threads(8)
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate_row.py"


# One step of a pivot cascade: translate a pair's test set (the first step) or the step before's translation into the
# language {lang} with the model's bilingual model of that step; the last step's is the pair's translation.
rule translate_pivot:
    input:
        models=get_pivot_files("model.pt"),
        src=get_pivot_source,
    output:
        hyp="results/{src}-{trg}/{model}/pivot/{run}/translations/{test}.{lang}",
        decoding="results/{src}-{trg}/{model}/pivot/{run}/translations/{test}.{lang}.json",
    params:
        decoding=ask(EXPERIMENT.test_decoding, "model"),
        device=get_decoding_device,
        bf16=get_decoding_bf16,
        normalize=get_pivot_normalize,
    log:
        "results/logs/translate_pivot/{src}-{trg}.{model}.{run}.{test}.{lang}.log",
    benchmark:
        "results/benchmarks/translate_pivot/{src}-{trg}.{model}.{run}.{test}.{lang}.tsv"
    threads: data_threads(8)
    resources:
        mem_mb=per_attempt(8000),
        runtime=per_attempt(60),
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/translate_row.py"


# Score a multilingual system's translation as score_translations scores a bilingual one; its cost is its model's.
use rule score_translations as score_multilingual_translations with:
    input:
        hyp="results/{src}-{trg}/{system}/{kind}/{run}/translations/{test}.{trg}",
        ref="results/{src}-{trg}/data/eval/{test}.{trg}",
        tok_ref=get_tokenized_ref,
        summaries=get_system_run_files("summary.json"),
    output:
        scores="results/{src}-{trg}/{system}/{kind}/{run}/scores/{test}.json",
    params:
        system=get_multilingual_row,
    log:
        "results/logs/score_multilingual_translations/{src}-{trg}.{system}.{kind}.{run}.{test}.log",


# Score a pivot cascade's translation; its cost is both steps' models.
use rule score_translations as score_pivot_translations with:
    input:
        hyp="results/{src}-{trg}/{model}/pivot/{run}/translations/{test}.{trg}",
        ref="results/{src}-{trg}/data/eval/{test}.{trg}",
        tok_ref=get_tokenized_ref,
        summaries=get_pivot_summaries,
    output:
        scores="results/{src}-{trg}/{model}/pivot/{run}/scores/{test}.json",
    params:
        system=get_pivot_row,
    log:
        "results/logs/score_pivot_translations/{src}-{trg}.{model}.{run}.{test}.log",


# Learning curves of one seed of a multilingual system (its dev set: every direction's).
rule plot_multilingual_curves:
    input:
        summary="results/multilingual/{system}/seed{seed}/model/summary.json",
    output:
        png=report(
            "results/plots/multilingual.{system}.seed{seed}.png",
            caption="../report/learning_curves.rst",
            category="Learning curves",
            subcategory="multilingual",
            labels={"model": "{system}", "stage": "multilingual", "seed": "{seed}"},
        ),
    params:
        label_smoothing=get_multilingual_label_smoothing,
        title=get_multilingual_curve_title,
    log:
        "results/logs/plot_multilingual_curves/{system}.seed{seed}.log",
    conda:
        "../../envs/nmt.yaml"
    script:
        "../scripts/plot_multilingual_curves.py"
