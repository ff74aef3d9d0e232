"""Rule prepare_eval_set: normalized source and verbatim reference of a dev or test set."""

from nmt.data.eval_sets import prepare_eval_set
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    prepare_eval_set(
        snakemake.input.src,
        snakemake.input.ref,
        snakemake.output.src,
        snakemake.output.ref,
        src_lang=snakemake.wildcards.src,
        punctuation=snakemake.params.punctuation,
        sources=snakemake.params.sources,
    )
