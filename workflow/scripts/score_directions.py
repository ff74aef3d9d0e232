"""Rule score_directions: a multilingual model's dev BLEU and chrF in each direction it translates."""

from pathlib import Path

from nmt.config import TrainConfig, from_dict
from nmt.entry import entry_point
from nmt.training.validation import score_directions

with entry_point(snakemake.log[0]):
    score_directions(
        Path(snakemake.input.models[0]).parent,
        snakemake.params.directions,
        list(snakemake.input.srcs),
        list(snakemake.input.refs),
        from_dict(TrainConfig, snakemake.params.training, "training"),
        snakemake.output.json,
        snakemake.output.md,
        zero_shot=tuple(snakemake.params.zero_shot),
        threads=snakemake.threads,
    )
