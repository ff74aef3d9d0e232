"""Rules tag_corpus and tag_dev_set: the pairs of several files in one, every source with its target language's tag."""

from nmt.data.tagging import tag_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    tag_corpus(
        list(snakemake.input.src),
        list(snakemake.input.trg),
        snakemake.params.trg_langs,  # one per file pair
        snakemake.output.src,
        snakemake.output.trg,
    )
