"""Rule train_multilingual_subword: a multilingual system's joint sentencepiece model, its target tags as pieces."""

from nmt.config import SubwordConfig, from_dict
from nmt.data.subword import train_subword_model
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    config = from_dict(SubwordConfig, snakemake.params.subword, "subword")
    train_subword_model(
        list(snakemake.input.texts), snakemake.output.model, config, snakemake.threads, symbols=snakemake.params.tags
    )
