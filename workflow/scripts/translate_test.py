"""Rules translate_test and backtranslate_part: translate one file with a trained model."""

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
