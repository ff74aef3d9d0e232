"""Rule distillation_table: teacher and students in quality, decoding speed and size; the plot of quality and speed."""

from nmt.entry import entry_point
from nmt.evaluation.deployment import deployment_rows, plot_deployment, read_timing, write_deployment

with entry_point(snakemake.log[0]):
    timing = read_timing(snakemake.input.timing)
    table = deployment_rows(snakemake.params.rows, timing, snakemake.params.n_samples, snakemake.params.seed)
    write_deployment(table, timing, snakemake.output.csv, snakemake.output.md)
    plot_deployment(table, snakemake.output.png)
