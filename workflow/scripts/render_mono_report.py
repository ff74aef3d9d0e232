"""Rule render_mono_report: the monolingual cleaning report as an HTML page for Snakemake's report."""

from nmt.entry import entry_point
from nmt.evaluation.report import render_mono_report

with entry_point(snakemake.log[0]):
    w = snakemake.wildcards
    render_mono_report(
        snakemake.input.report,
        snakemake.output.html,
        f"Monolingual {w.trg} sample for back-translation ({w.src}-{w.trg})",
    )
