"""Rule tabulate_rounds: the rounds of a variant's iterative back-translation in one table."""

from nmt.entry import entry_point
from nmt.evaluation.backtranslation import tabulate_rounds

with entry_point(snakemake.log[0]):
    tabulate_rounds(
        snakemake.input.reverse_summaries,
        snakemake.input.synthetic_reports,
        snakemake.input.forward_summaries,
        snakemake.input.forward_reports,
        snakemake.output.json,
        snakemake.output.md,
    )
