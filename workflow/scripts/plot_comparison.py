"""Rule plot_comparison: the systems of one language pair in one figure."""

from pathlib import Path

from nmt.entry import entry_point
from nmt.evaluation.plots import plot_comparison

with entry_point(snakemake.log[0]):
    w = snakemake.wildcards
    summaries = snakemake.input.summaries
    runs = {label: Path(summary).parent for label, summary in zip(snakemake.params.labels, summaries, strict=True)}
    plot_comparison(runs, snakemake.output.png, title=f"{w.src}-{w.trg}: the systems (seed {snakemake.params.seed})")
