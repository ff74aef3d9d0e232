"""Rule download_corpus: fetch one file (mirror from $NMT_MIRROR, sha256, retries, atomic write, manifest)."""

from nmt.download import download
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    download(snakemake.params.url, snakemake.output.data, sha256=snakemake.params.sha256)
