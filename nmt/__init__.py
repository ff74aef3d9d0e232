"""nmt: neural machine translation library behind the Snakemake pipeline (no Snakemake imports)."""

import os

__version__ = "0.1.0"

# oneDNN, which runs bfloat16 matrix products on the CPU, caches a primitive with its buffers for each
# input shape, 1,024 of them by default, and batches come in many shapes: 64 keep the speed at a lower
# peak memory (benchmarks/README.md, "Measurements behind the code"). A user's own setting wins. oneDNN
# reads the variable when it makes its first primitive, so setting it here, before any matrix product, works.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
