"""Rule render_synthetic_report: a back-translation variant's corpus report as an HTML page for Snakemake's report."""

from nmt.entry import entry_point
from nmt.evaluation.report import render_synthetic_report

with entry_point(snakemake.log[0]):
    w = snakemake.wildcards
    render_synthetic_report(
        snakemake.input.report,
        snakemake.output.html,
        f"Training corpus of back-translation variant {w.variant} ({w.src}-{w.trg})",
    )
