"""Rules translate_test, backtranslate_part, distill_part and translate_export: translate one file with a model, an
ensemble of models, or a CTranslate2 export (translate_test also records the device and precision that decoded it).
An export's process never imports torch (nmt.decoding imports it for the torch runtime only), so that
the job's time is a deployment's."""

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
        device=snakemake.params.get("device", "auto"),
        bf16=snakemake.params.get("bf16", "auto"),
        threads=snakemake.threads,
        record_path=snakemake.output.get("decoding"),
    )
