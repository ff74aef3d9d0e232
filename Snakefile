# NMT pipeline: download -> clean -> subword -> train -> translate -> score -> tables.
#
# Results path scheme (all under results/, git-ignored):
#   data/archive/{corpus}                              archive/TSV/OPUS zip of all languages (+ .manifest.json)
#   data/sacrebleu/{test_set}/                         sacrebleu cache of test sets fetched by name
#   data/download/{corpus}.{lang}                      one language as served or extracted (+ .manifest.json)
#   {src}-{trg}/data/clean/{corpus}.{lang}             cleaned training corpus (+ {corpus}.report.tsv/.md/.html)
#   {src}-{trg}/data/eval/{corpus}.{lang}              dev/test set: normalized source, verbatim reference
#   {src}-{trg}/subword/{lang}.model                   sentencepiece model per language (a copy when joint)
#   {src}-{trg}/data/mono/mono.{trg}                   cleaned monolingual sample (+ mono.report.json/.html)
#   {src}-{trg}/backtranslation/reverse/               the trg->src model (model.pt, summary.json, ...)
#   {src}-{trg}/backtranslation/parts/{part}.{trg}     monolingual parts (checkpoint split_monolingual)
#   {src}-{trg}/backtranslation/{variant}/parts/{part}.{src}   back-translated parts
#   {src}-{trg}/backtranslation/{variant}/train.{lang} real + synthetic training corpus (+ report.json/.html)
#   {src}-{trg}/distillation/parts/{part}.{src}        training source in parts (checkpoint split_distillation_source)
#   {src}-{trg}/distillation/teacher/{part}.{trg}      the teacher's translation of each part
#   {src}-{trg}/distillation/train.{lang}              distilled training corpus (+ report.json)
#   {src}-{trg}/data/bin/{stage}/train.json            binarized training set of a stage: header, and beside it
#     train.{src,trg}.{ids,offsets}                    memory-mapped token ids and int64 sentence offsets
#   {src}-{trg}/data/bin/reverse/train.*               the same, reversed, for the back-translation model
#   {src}-{trg}/{model}/{stage}/seed{N}/model/          model.pt, summary.json, train.tsv, valid.tsv, checkpoints/
#   {src}-{trg}/{model}/{stage}/{run}/translations/{test}.{trg}   detokenized system output (+ .json: device, precision)
#   {src}-{trg}/{model}/{stage}/{run}/scores/{test}.json   BLEU/chrF/TER with sacrebleu signatures
#   {src}-{trg}/{model}/distilled/seed{N}/ctranslate2/{quantization}/model/   a student's CTranslate2 export
#   {src}-{trg}/{model}/distilled/seed{N}/ctranslate2/{quantization}/translations/{test}.{trg}   its output
#   {src}-{trg}/significance/{test}.json               paired bootstrap of every run against the baseline
#   tables/scores.{csv,md}                             long table: one row per run and test set
#   tables/summary.csv                                 per system: mean and std over seeds, ensemble rows
#   tables/table.{md,tex,csv}                          wide table: systems x pairs/metrics, as in papers
#   tables/{table,summary,scores,significance}.html    the tables as the HTML report shows them
#   tables/distillation.{csv,md}                       teacher and students: quality, decoding speed, size
#   plots/distillation.png                             their BLEU against decoding speed
#   plots/{src}-{trg}.{model}.{stage}.seed{N}.png      learning curves (train loss, valid loss and BLEU) per seed
#   plots/{src}-{trg}.comparison.png                   learning curves of all systems of a pair
#   benchmarks/{rule}/...tsv                           Snakemake benchmark of the heavy jobs
#   logs/{rule}/...log                                 one log per job
# {model} is a key of config["models"] (transformer, rnn, convs2s by default); {stage} is "baseline"
# (trained on the parallel data only), a key of config["backtranslation"]["variants"] (trained on
# that variant's real + synthetic corpus) or "distilled" (a student trained on the teacher's translations). {run} is seed{N} for each of config["seeds"], or "ensemble"
# (all seeds' models decoding together) when there are several seeds.

import sys

from snakemake.utils import min_version

from nmt.errors import ConfigError
from nmt.config_file import check_config_syntax

min_version("9.0")

# Snakemake's own message on a YAML syntax error (a tab, a bad indent) names neither the file nor the line.
try:
    check_config_syntax("config.yaml")
except ConfigError as e:
    sys.exit(f"config error: {e}")


configfile: "config.yaml"


# snakemake --report report.html: this description, then the items each rule marks with report().
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/subword.smk"
include: "workflow/rules/backtranslate.smk"
include: "workflow/rules/distill.smk"
include: "workflow/rules/binarize.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"


# Temp files (.NAME.PID.tmp) that jobs killed together with Snakemake (kill -9) left are removed at the next run.
onstart:
    remove_stale_temp_files("results")


rule all:
    input:
        "results/tables/scores.csv",
        "results/tables/table.md",
        system_plots(),
        report_pages(),
        ["results/tables/distillation.md"] if KD else [],
