"""Rules train_model and train_reverse_model: train one model; re-running resumes from its last checkpoint."""

from pathlib import Path

from nmt.entry import entry_point
from nmt.training import train

with entry_point(snakemake.log[0]):
    train(
        snakemake.params.model,
        snakemake.params.training,
        train_src=snakemake.input.src,
        train_trg=snakemake.input.trg,
        dev_src=snakemake.input.dev_src,
        dev_ref=snakemake.input.dev_ref,
        src_spm=snakemake.input.src_spm,
        trg_spm=snakemake.input.trg_spm,
        model_dir=Path(snakemake.output.model).parent,
    )
