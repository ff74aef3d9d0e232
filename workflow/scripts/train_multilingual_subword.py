"""Rule train_multilingual_subword: a multilingual system's joint sentencepiece model, its target tags as pieces."""

from nmt.config import SubwordConfig, from_dict
from nmt.data.subword import train_subword_model
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    where = f"multilingual.{snakemake.wildcards.system}.subword"
    config = from_dict(SubwordConfig, snakemake.params.subword, where)
    texts, tags = list(snakemake.input.texts), snakemake.params.tags
    train_subword_model(texts, snakemake.output.model, config, snakemake.threads, symbols=tags, where=where)
