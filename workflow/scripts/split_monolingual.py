"""Checkpoints split_monolingual and split_source_monolingual: cut a monolingual sample into parts for translation."""

from pathlib import Path

from nmt.data.synthetic import split_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    split_corpus(
        snakemake.input.mono,
        snakemake.output.parts,
        snakemake.params.chunk_lines,
        suffix=Path(snakemake.input.mono).suffix[1:],  # the parts keep the sample's language, mono.{lang}
    )
