"""Rule plot_multilingual_curves: train loss, dev loss and BLEU per update of one seed of a multilingual system."""

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
