"""Checkpoint split_distillation_source: cut the cleaned training source into parts for the teacher's jobs."""

from nmt.data.synthetic import split_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    split_corpus(
        list(snakemake.input.text),
        snakemake.output.parts,
        snakemake.params.chunk_lines,
        suffix=snakemake.wildcards.src,
    )
