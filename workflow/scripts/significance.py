"""Rule significance: sacrebleu's paired bootstrap of every run against the baseline, for one test set."""

from nmt.entry import entry_point
from nmt.evaluation.significance import paired_bootstrap, write_significance

with entry_point(snakemake.log[0]):
    hyps = list(snakemake.input.hyps)  # the baseline first
    records = paired_bootstrap(
        snakemake.input.ref,
        {hyp: hyp for hyp in hyps},
        baseline=hyps[0],
        trg_lang=snakemake.wildcards.trg,
        n_samples=snakemake.params.n_samples,
        seed=snakemake.params.seed,
    )
    write_significance(records, snakemake.output.tests)
