"""Rule download_corpus: one language of a corpus, by its importer (mirror from $NMT_MIRROR, checksums, manifest)."""

import os

from nmt.config import CorpusConfig, from_dict
from nmt.data.importers import import_corpus
from nmt.entry import entry_point

# sacrebleu reads its cache folder from $SACREBLEU once, when import_corpus first imports it.
os.environ["SACREBLEU"] = os.path.abspath(snakemake.params.sacrebleu_dir)
with entry_point(snakemake.log[0]):
    import_corpus(
        from_dict(CorpusConfig, snakemake.params.corpus, f"corpora.{snakemake.wildcards.corpus}"),
        snakemake.wildcards.lang,
        snakemake.output.data,
        archive=snakemake.input.archive[0] if snakemake.input.archive else None,
        sacrebleu_dir=snakemake.params.sacrebleu_dir,
    )
