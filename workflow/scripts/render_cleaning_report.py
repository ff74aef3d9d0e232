"""Rule render_cleaning_report: a training corpus's cleaning report as an HTML page for Snakemake's report."""

from nmt.entry import entry_point
from nmt.evaluation.report import render_cleaning_report

with entry_point(snakemake.log[0]):
    w = snakemake.wildcards
    render_cleaning_report(
        snakemake.input.report,
        snakemake.output.html,
        f"Cleaning of {w.corpus} ({w.src}-{w.trg})",
        settings=snakemake.params.cleaning,
    )
