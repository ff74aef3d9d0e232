"""Rule collect_scores: every score record into the result tables."""

from nmt.entry import entry_point
from nmt.tables import collect_scores, write_tables

with entry_point(snakemake.log[0]):
    write_tables(collect_scores(snakemake.input.scores), snakemake.output.csv, snakemake.output.md)
