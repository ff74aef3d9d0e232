"""Rule build_distilled_corpus: the training source with the teacher's translations as targets (degenerate ones
dropped), optionally after the real pairs."""

from nmt.config import SyntheticConfig, from_dict
from nmt.data.synthetic import build_synthetic_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    build_synthetic_corpus(
        snakemake.input.real_src,
        snakemake.input.real_trg,
        snakemake.input.teacher,
        snakemake.input.source,
        snakemake.output.src,
        snakemake.output.trg,
        snakemake.output.report,
        from_dict(SyntheticConfig, snakemake.params.synthetic, "distillation.filters"),
        generated_side="trg",
    )
