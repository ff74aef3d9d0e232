"""Rules translate_multilingual and translate_pivot: translate a test set with a multilingual model (or the ensemble of
its seeds; the target language's tag first on every source), or one step of a pivot cascade (the test set, or the
step before's translation, normalized as the model's training sources were); record the device and precision."""

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
        **{key: getattr(snakemake.params, key) for key in ("trg_lang", "normalize") if key in snakemake.params.keys()},
    )
