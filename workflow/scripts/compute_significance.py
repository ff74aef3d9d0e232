"""Rule compute_significance: sacrebleu's paired bootstrap of every run against the baseline, for one test set."""

from nmt.entry import entry_point
from nmt.evaluation.significance import paired_bootstrap, write_significance

with entry_point(snakemake.log[0]):
    records = paired_bootstrap(
        snakemake.input.ref,
        dict(zip(snakemake.params.systems, snakemake.input.hyps, strict=True)),  # run name -> its translation
        baseline=snakemake.params.baseline,
        trg_lang=snakemake.wildcards.trg,
        n_samples=snakemake.params.n_samples,
        seed=snakemake.params.seed,
    )
    write_significance(records, snakemake.output.tests)
