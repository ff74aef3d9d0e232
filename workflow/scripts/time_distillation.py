"""Rule time_distillation: each row of the distillation table decoded in turn, alone on the machine, and timed."""

from nmt.entry import entry_point
from nmt.evaluation.distillation import time_rows

with entry_point(snakemake.log[0]):
    time_rows(
        snakemake.params.rows,
        snakemake.output.timing,
        snakemake.params.repeats,
        # the decoding jobs' threads, which Snakemake capped at --cores as it caps this job's
        threads=min(snakemake.params.threads, snakemake.threads),
    )
