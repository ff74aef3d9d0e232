"""Which runtime decodes a job, torch or CTranslate2 (``runtime: auto``).

The workflow asks while it parses the config (on a login node that may have neither torch nor ctranslate2), which
decoding jobs read a CTranslate2 export, and each job asks again as it loads its models
(:func:`nmt.decoding.translation.load_decoding`). Both see the same answer where the jobs import what Snakemake
imports: its own environment, or envs/nmt.yaml, which has ctranslate2. Torch-free, as :mod:`nmt.experiment`.
"""

import importlib.util

from nmt.config import DecodeConfig
from nmt.errors import ConfigError


def ctranslate2_installed() -> bool:
    """Whether this Python can import ctranslate2 (an optional package: pip install 'nmt[export]'), without
    importing it."""
    return importlib.util.find_spec("ctranslate2") is not None


def why_not_ctranslate2(config: DecodeConfig, archs: list[str]) -> str | None:
    """What CTranslate2 cannot decode, as torch does, in ``config``'s search over models of ``archs`` (one per model;
    several decode as an ensemble), or None."""
    if len(archs) != 1:
        return f"an ensemble (of {len(archs)} models)"
    if archs[0] != "transformer":
        return f"a {archs[0]} model (CTranslate2 has the Transformer only)"
    if config.method == "beam" and config.length_normalization != "ctranslate2":
        return "beam search with length_normalization gnmt (CTranslate2's beam search divides by length ** alpha)"
    return None


def choose_runtime(config: DecodeConfig, archs: list[str], installed: bool, where: str = "decoding") -> tuple[str, str]:
    """The runtime that decodes with ``config`` models of ``archs``, and why (a clause for the job's log).

    ``config.runtime`` when it is torch or ctranslate2; for ``auto``, ctranslate2 when it is ``installed`` and runs
    the search over these models as torch does (:func:`why_not_ctranslate2`), else torch.

    :raises ConfigError: naming ``where``'s runtime, for ctranslate2 where CTranslate2 cannot run the search
    """
    if config.runtime == "ctranslate2":
        why = why_not_ctranslate2(config, archs)
        if why:
            raise ConfigError(f"{where}.runtime: ctranslate2 cannot decode {why}; runtime auto decodes it in torch")
    if config.runtime != "auto":
        return config.runtime, f"runtime {config.runtime}"
    unused = f"; quantization {config.quantization} unused" if config.quantization != "float32" else ""
    if not installed:
        return "torch", f"ctranslate2 is not installed (pip install 'ctranslate2==4.8.5'){unused}"
    why = why_not_ctranslate2(config, archs)
    if why:
        return "torch", f"CTranslate2 cannot decode {why}{unused}"
    return "ctranslate2", f"one Transformer and {config.describe()}, which CTranslate2 runs as torch does"
