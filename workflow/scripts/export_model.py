"""Rule export_model: a trained Transformer's model directory as a CTranslate2 export with one weight type."""

from pathlib import Path

from nmt.decoding.ctranslate2 import export_model
from nmt.entry import entry_point

with entry_point(snakemake.log[0]):
    model = Path(snakemake.input.model).parent
    # Snakemake made the folder of the output; the export replaces it whole.
    export_model(model, Path(snakemake.output.model).parent, quantization=snakemake.wildcards.quantization, force=True)
