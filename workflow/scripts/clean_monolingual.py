"""Rule clean_monolingual: clean and sample the target-language monolingual corpora."""

from nmt.cleaning import clean_monolingual
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    clean_monolingual(
        snakemake.input.mono,
        snakemake.output.mono,
        snakemake.output.report,
        snakemake.params.cleaning,
        lang=snakemake.wildcards.trg,
        exclude=snakemake.input.exclude,
        max_sentences=snakemake.params.max_sentences,
        seed=snakemake.params.seed,
        sources=snakemake.params.sources,
    )
