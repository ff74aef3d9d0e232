"""Rule train_subword: sentencepiece models for the source and target language."""

from nmt.entry import entry_point
from nmt.subword import train_subword

with entry_point(snakemake.log[0]):
    train_subword(
        snakemake.input.src,
        snakemake.input.trg,
        snakemake.output.src,
        snakemake.output.trg,
        snakemake.params.subword,
        threads=snakemake.threads,
    )
