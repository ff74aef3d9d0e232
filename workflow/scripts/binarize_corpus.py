"""Rules binarize_corpus and binarize_reverse_corpus: encode a training set once into memory-mapped token ids."""

from nmt.data.binarize import binarize
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    binarize(
        src_paths=snakemake.input.src,
        trg_paths=snakemake.input.trg,
        src_spm=snakemake.input.src_spm,
        trg_spm=snakemake.input.trg_spm,
        out_prefix=snakemake.params.prefix,
        max_length=snakemake.params.max_length,
        threads=snakemake.threads,
    )
