"""Rule train_subword: sentencepiece models for the source and target language."""

from nmt.config import SubwordConfig, from_dict
from nmt.data.subword import train_subword
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    train_subword(
        snakemake.input.src,
        snakemake.input.trg,
        snakemake.output.src,
        snakemake.output.trg,
        from_dict(SubwordConfig, snakemake.params.subword, "subword"),
        threads=snakemake.threads,
    )
