# NMT pipeline: download -> clean -> subword -> back-translate, distill, multilingual -> binarize -> train ->
# translate -> score -> tables. This file is the table of contents: the config (config.yaml, checked against
# workflow/schemas/config.schema.yaml), a rule file per stage (workflow/rules/), and rule all.
# Everything is written under results/ (git-ignored); every path, and what its {model}, {stage} and {run}
# mean: docs/results.md, "Results path scheme".

import sys

from snakemake.utils import min_version

from nmt.config_file import check_config_syntax
from nmt.errors import ConfigError

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
include: "workflow/rules/multilingual.smk"  # after the rules it reuses (binarize, score, plot)


# Temp files (.NAME.PID.tmp) that jobs killed together with Snakemake (kill -9) left are removed at the next run.
onstart:
    remove_stale_temp_files("results")


rule all:
    input:
        "results/tables/scores.csv",
        "results/tables/table.md",
        system_plots(),
        report_pages(),
        round_tables(),
        ["results/tables/distillation.md"] if KD else [],
        multilingual_targets(),
