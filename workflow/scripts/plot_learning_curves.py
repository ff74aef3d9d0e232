"""Rule plot_learning_curves: train loss, dev loss and BLEU per update of one model, with a note on the losses."""

from pathlib import Path

from nmt.entry import entry_point
from nmt.evaluation.plots import plot_learning_curves

with entry_point(snakemake.log[0]):
    w = snakemake.wildcards
    plot_learning_curves(
        Path(snakemake.input.summary).parent,
        f"{w.src}-{w.trg} {w.model} ({w.stage}, seed {w.seed})",
        snakemake.output.png,
        label_smoothing=snakemake.params.label_smoothing,
    )
