"""Rules plot_learning_curves and plot_multilingual_curves: train loss, dev loss and BLEU per update of one model, with
a note on the losses."""

from pathlib import Path

from nmt.entry import entry_point
from nmt.evaluation.plots import plot_learning_curves

with entry_point(snakemake.log[0]):
    plot_learning_curves(
        Path(snakemake.input.summary).parent,
        snakemake.params.title,
        snakemake.output.png,
        label_smoothing=snakemake.params.label_smoothing,
    )
