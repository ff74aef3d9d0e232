"""Rule score_translations: BLEU, chrF and TER of one translation (and BLEU against the official tokenized reference
where the test set has one), with the training facts of its model(s)."""

from nmt.entry import entry_point
from nmt.evaluation.metrics import write_scores

with entry_point(snakemake.log[0]):
    write_scores(
        snakemake.input.hyp,
        snakemake.input.ref,
        trg_lang=snakemake.wildcards.trg,
        system=snakemake.params.system,
        training_summaries=list(snakemake.input.summaries),
        out_path=snakemake.output.scores,
        tok_ref_path=snakemake.input.tok_ref[0] if snakemake.input.tok_ref else None,
    )
