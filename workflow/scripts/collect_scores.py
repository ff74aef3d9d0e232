"""Rule collect_scores: every score record into the long, per-system and wide result tables, and their HTML pages;
the tables and figures of systems no longer configured removed."""

from nmt.config import TablesConfig, from_dict
from nmt.entry import entry_point
from nmt.evaluation.report import write_result_pages
from nmt.evaluation.significance import read_significance, significance_frame
from nmt.evaluation.stale_results import remove_stale_results
from nmt.evaluation.tables import (
    budget_notes,
    collect_scores,
    decoding_notes,
    summarize_seeds,
    wide_table,
    write_tables,
    write_wide,
)

with entry_point(snakemake.log[0]):
    tables = from_dict(TablesConfig, snakemake.params.tables, "tables")
    long = collect_scores(snakemake.input.scores, snakemake.input.decodings)
    write_tables(long, snakemake.output.csv, snakemake.output.md)
    summary = summarize_seeds(long)
    write_tables(summary, snakemake.output.summary)
    tests = [record for path in snakemake.input.tests for record in read_significance(path)]
    wide, notes = wide_table(
        summary,
        tuple(tables.metrics),
        significance_frame(tests, long),
        published=tables.published,
        costs=snakemake.params.get("costs", False),
    )
    notes += budget_notes(long)  # what a model's systems held equal: updates, else each one's
    notes += decoding_notes(long)  # runs decoded on different devices or in different precisions
    write_wide(wide, notes, snakemake.output.wide_md, snakemake.output.wide_tex, snakemake.output.wide_csv)
    write_result_pages(
        long,
        summary,
        wide,
        notes,
        tests,
        table_html=snakemake.output.table_html,
        summary_html=snakemake.output.summary_html,
        scores_html=snakemake.output.scores_html,
        significance_html=snakemake.output.significance_html,
    )
    remove_stale_results("results", snakemake.params.plots, snakemake.params.distillation)
