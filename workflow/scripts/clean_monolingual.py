"""Rule clean_monolingual: clean and sample the target-language monolingual corpora."""

from nmt.config import CleanConfig, from_dict
from nmt.data.cleaning import clean_monolingual
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    clean_monolingual(
        snakemake.input.mono,
        snakemake.output.mono,
        snakemake.output.report,
        from_dict(CleanConfig, snakemake.params.cleaning, "cleaning"),
        lang=snakemake.wildcards.trg,
        exclude=snakemake.input.exclude,
        max_sentences=snakemake.params.max_sentences,
        seed=snakemake.params.seed,
        sources=snakemake.params.sources,
    )
