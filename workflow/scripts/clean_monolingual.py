"""Rules clean_monolingual and clean_source_monolingual: clean and sample one language of the monolingual corpora."""

from pathlib import Path

from nmt.config import CleanConfig, from_dict
from nmt.data.cleaning import clean_monolingual
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    clean_monolingual(
        snakemake.input.mono,
        snakemake.output.mono,
        snakemake.output.report,
        from_dict(CleanConfig, snakemake.params.cleaning, "cleaning"),
        lang=Path(snakemake.output.mono).suffix[1:],  # the sample's language: its extension, mono.{lang}
        exclude=snakemake.input.exclude,
        max_sentences=snakemake.params.max_sentences,
        seed=snakemake.params.seed,
        sources=snakemake.params.sources,
        exclude_train=snakemake.input.get("train", []),
        sentence_form=snakemake.params.sentence_form,
    )
