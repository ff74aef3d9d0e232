"""Rules train_model and train_reverse_model: train one model; re-running resumes from its last checkpoint.

More than one GPU (resource ``gpu``, or ``gres: gpu:N`` per node), CPU process (resource ``processes``)
or node (resource ``nodes``, in a SLURM job) trains data parallel under torchrun.
"""

from pathlib import Path

from nmt.allocator import keep_freed_memory
from nmt.config import TrainConfig, from_dict
from nmt.entry import entry_point
from nmt.model_config import ModelMeta
from nmt.training.distributed import launch_training, processes_per_node
from nmt.training.files import TrainFiles
from nmt.training.loop import train

files = TrainFiles(
    train_data=snakemake.params.train_data,
    dev_src=snakemake.input.dev_src,
    dev_ref=snakemake.input.dev_ref,
    src_spm=snakemake.input.src_spm,
    trg_spm=snakemake.input.trg_spm,
    model_dir=str(Path(snakemake.output.model).parent),
)
nodes = int(snakemake.resources.get("nodes", 1))
with entry_point(snakemake.log[0]):
    config = from_dict(TrainConfig, snakemake.params.training, "training").on_threads(snakemake.threads)
    meta = from_dict(ModelMeta, snakemake.params.meta, "meta")
    processes = processes_per_node(snakemake.resources, nodes)
    if processes > 1 or nodes > 1:
        launch_training(processes, snakemake.params.model, config, files, snakemake.log[0], nodes, meta=meta)
    else:
        keep_freed_memory()  # reuse each update's freed tensors instead of faulting pages in
        train(snakemake.params.model, config, files, meta=meta)
