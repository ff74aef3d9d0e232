"""Checkpoint split_monolingual: cut the monolingual text into parts for back-translation jobs."""

from nmt.data.synthetic import split_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    split_corpus(
        snakemake.input.mono,
        snakemake.output.parts,
        snakemake.params.chunk_lines,
        suffix=snakemake.wildcards.trg,
    )
