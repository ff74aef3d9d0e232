"""Rule build_synthetic_corpus: filter and tag the back-translations (the real pairs only counted)."""

from nmt.config import SyntheticConfig, from_dict
from nmt.data.synthetic import build_synthetic_corpus
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    build_synthetic_corpus(
        snakemake.input.real_src,
        snakemake.input.real_trg,
        snakemake.input.bt_src,
        snakemake.input.bt_trg,
        snakemake.output.src,
        snakemake.output.trg,
        snakemake.output.report,
        from_dict(SyntheticConfig, snakemake.params.synthetic, "backtranslation.variants"),
        seed=snakemake.params.seed,
        write_real=False,
    )
