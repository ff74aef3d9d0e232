"""Rules train_model and train_reverse_model: train one model; re-running resumes from its last checkpoint.

More than one GPU (resource ``gpu``) or CPU process (resource ``processes``) trains data parallel
under torchrun.
"""

from pathlib import Path

from nmt.distributed import launch_training
from nmt.entry import entry_point
from nmt.training import train

files = {
    "train_src": snakemake.input.src,
    "train_trg": snakemake.input.trg,
    "dev_src": snakemake.input.dev_src,
    "dev_ref": snakemake.input.dev_ref,
    "src_spm": snakemake.input.src_spm,
    "trg_spm": snakemake.input.trg_spm,
    "model_dir": str(Path(snakemake.output.model).parent),
}
processes = max(int(snakemake.resources.get("gpu", 0)), int(snakemake.resources.get("processes", 1)))
with entry_point(snakemake.log[0]):
    if processes > 1:
        launch_training(
            processes, snakemake.params.model, snakemake.params.training, files, snakemake.log[0], snakemake.params.meta
        )
    else:
        train(snakemake.params.model, snakemake.params.training, **files, meta=snakemake.params.meta)
