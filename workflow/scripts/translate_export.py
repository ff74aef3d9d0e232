"""Rule translate_export: translate a test set with a student's CTranslate2 export, in a process that never imports
torch (nmt.decoding.translation imports it for the torch runtime only), so that the job's time is a deployment's."""

from pathlib import Path

from nmt.config import DecodeConfig, from_dict
from nmt.decoding.translation import translate_file
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    translate_file(
        [Path(model).parent for model in snakemake.input.models],
        snakemake.input.src,
        snakemake.output.hyp,
        from_dict(DecodeConfig, snakemake.params.decoding, "decoding"),
        threads=snakemake.threads,
    )
