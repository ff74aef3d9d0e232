"""nmt: neural machine translation library behind the Snakemake pipeline (no Snakemake imports)."""

__version__ = "0.1.0"
