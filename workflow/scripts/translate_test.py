"""Rule translate_test: translate one test set with the trained model."""

from pathlib import Path

import torch

from nmt.entry import entry_point
from nmt.translation import translate_file

with entry_point(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    translate_file(
        Path(snakemake.input.model).parent,
        snakemake.input.src,
        snakemake.output.hyp,
        snakemake.params.decoding,
    )
