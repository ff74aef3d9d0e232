"""Rules translate_test and backtranslate_part: translate one file with a model, or an ensemble of models."""

from pathlib import Path

import torch

from nmt.config import DecodeConfig, from_dict
from nmt.decoding.allocator import keep_freed_memory
from nmt.decoding.translation import translate_file
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    keep_freed_memory()  # a decoding process: reuse each step's freed tensors instead of faulting pages in
    translate_file(
        [Path(model).parent for model in snakemake.input.models],
        snakemake.input.src,
        snakemake.output.hyp,
        from_dict(DecodeConfig, snakemake.params.decoding, "decoding"),
    )
