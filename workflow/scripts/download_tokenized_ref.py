"""Rule download_tokenized_ref: one language of a test set's official tokenized reference (mirror from $NMT_MIRROR,
sha256 check, manifest)."""

from nmt.data.download import download
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    download(snakemake.params.source["url"], snakemake.output.ref, sha256=snakemake.params.source["sha256"])
