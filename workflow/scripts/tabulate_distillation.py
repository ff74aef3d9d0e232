"""Rule tabulate_distillation: teacher and students in quality, speed and size; the plot of quality against speed."""

from nmt.entry import entry_point
from nmt.evaluation.distillation import distillation_table, plot_distillation, read_timing, write_distillation_table

with entry_point(snakemake.log[0]):
    timing = read_timing(snakemake.input.timing)
    table = distillation_table(snakemake.params.rows, timing, snakemake.params.n_samples, snakemake.params.seed)
    write_distillation_table(table, timing, snakemake.output.csv, snakemake.output.md)
    plot_distillation(table, snakemake.output.png)
