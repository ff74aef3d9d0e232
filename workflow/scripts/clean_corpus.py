"""Rule clean_corpus: normalize, filter and decontaminate one parallel training corpus."""

from nmt.config import CleanConfig, from_dict
from nmt.data.cleaning import clean_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    clean_corpus(
        snakemake.input.src,
        snakemake.input.trg,
        snakemake.output.src,
        snakemake.output.trg,
        snakemake.output.report,
        from_dict(CleanConfig, snakemake.params.cleaning, "cleaning"),
        src_lang=snakemake.wildcards.src,
        trg_lang=snakemake.wildcards.trg,
        exclude=snakemake.input.exclude,
        threads=snakemake.threads,
        sources=snakemake.params.sources,
    )
