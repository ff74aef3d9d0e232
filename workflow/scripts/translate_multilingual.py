"""Rule translate_multilingual: translate a test set with a multilingual model (or the ensemble of its seeds), the
target language's tag first on every source, and record the device and precision that decoded it."""

from pathlib import Path

from nmt.allocator import keep_freed_memory
from nmt.config import DecodeConfig, from_dict
from nmt.decoding.streaming import translate_file
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    keep_freed_memory(mkl_buffers=False)  # reuse each step's freed tensors instead of faulting pages in
    translate_file(
        [Path(model).parent for model in snakemake.input.models],
        snakemake.input.src,
        snakemake.output.hyp,
        from_dict(DecodeConfig, snakemake.params.decoding, "decoding"),
        device=snakemake.params.device,
        bf16=snakemake.params.bf16,
        threads=snakemake.threads,
        record_path=snakemake.output.decoding,
        trg_lang=snakemake.params.trg_lang,
    )
