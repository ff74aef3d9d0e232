"""Rule download_corpus: one language of a corpus, by its importer (mirror from $NMT_MIRROR, checksums, manifest)."""

import os

from nmt.entry import entry_point
from nmt.importers import import_corpus

# sacrebleu reads its cache folder from $SACREBLEU once, when import_corpus first imports it.
os.environ["SACREBLEU"] = os.path.abspath(snakemake.params.sacrebleu_dir)
with entry_point(snakemake.log[0]):
    import_corpus(
        snakemake.params.corpus,
        snakemake.wildcards.lang,
        snakemake.output.data,
        archive=snakemake.input.archive[0] if snakemake.input.archive else None,
        sacrebleu_dir=snakemake.params.sacrebleu_dir,
    )
