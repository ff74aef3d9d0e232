"""Rule fetch_archive: the archive, TSV file or OPUS zip that holds every language of a corpus."""

from nmt.config import CorpusConfig, from_dict
from nmt.data.importers import fetch_archive
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    corpus = from_dict(CorpusConfig, snakemake.params.corpus, f"corpora.{snakemake.wildcards.corpus}")
    fetch_archive(corpus, snakemake.output.archive)
