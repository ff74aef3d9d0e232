"""Rule fetch_archive: the archive, TSV file or OPUS zip that holds every language of a corpus."""

from nmt.entry import entry_point
from nmt.importers import fetch_archive

with entry_point(snakemake.log[0]):
    fetch_archive(snakemake.params.corpus, snakemake.output.archive)
