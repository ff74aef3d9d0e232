"""Rules translate_test, backtranslate_part, distill_part, translate_export, translate_multilingual and
translate_pivot: translate one file with a model, an ensemble of models, or a CTranslate2 export (the test sets'
translations also record the device and precision that decoded them).
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
        trg_lang=snakemake.params.get("trg_lang"),  # a multilingual model's: its tag starts every source
        normalize=snakemake.params.get("normalize", False),  # a pivot cascade's intermediate translation
    )
