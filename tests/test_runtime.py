"""Which runtime decodes (runtime auto), and CTranslate2's compute type on a device: torch-free decisions, tested
without a GPU."""

import pytest

from nmt.config import DecodeConfig
from nmt.decoding.runtime import choose_runtime, ct2_compute_type
from nmt.errors import ConfigError

GREEDY = DecodeConfig(method="greedy", runtime="auto")
SHARED_BEAM = DecodeConfig(runtime="auto", length_normalization="ctranslate2")


@pytest.mark.parametrize(
    ("config", "archs", "installed", "runtime", "why"),
    [
        (GREEDY, ["transformer"], True, "ctranslate2", "one Transformer and greedy, which CTranslate2 runs as torch"),
        (SHARED_BEAM, ["transformer"], True, "ctranslate2", "one Transformer and beam5"),
        (DecodeConfig(runtime="auto"), ["transformer"], True, "torch", "CTranslate2 cannot decode beam search with"),
        (GREEDY, ["transformer"] * 3, True, "torch", "CTranslate2 cannot decode an ensemble (of 3 models)"),
        (GREEDY, ["convs2s"], True, "torch", "CTranslate2 cannot decode a convs2s model"),
        (GREEDY, ["transformer"], False, "torch", "ctranslate2 is not installed"),
        (DecodeConfig(method="greedy"), ["rnn"], True, "torch", "runtime torch"),
    ],
)
def test_auto_chooses_ctranslate2_where_it_runs_the_search(config, archs, installed, runtime, why):
    chosen, reason = choose_runtime(config, archs, installed)
    assert chosen == runtime and reason.startswith(why), reason


def test_runtime_ctranslate2_where_it_cannot_run_the_search_is_one_line_naming_the_key():
    config = DecodeConfig(method="sample", runtime="ctranslate2")
    with pytest.raises(ConfigError, match=r"^backtranslation\.variants\.bt\.generation\.runtime: ctranslate2 cannot"):
        choose_runtime(config, ["rnn"], True, "backtranslation.variants.bt.generation")
    assert choose_runtime(config, ["transformer"], False) == ("ctranslate2", "runtime ctranslate2")


@pytest.mark.parametrize(
    ("device", "weights", "bf16", "compute_type"),
    [
        ("cpu", "float32", "auto", "default"),  # the export's own type
        ("cpu", "int8", "on", "default"),
        ("cuda", "float32", "auto", "float16"),
        ("cuda", "int8", "auto", "int8_float16"),
        ("cuda", "int8_float32", "on", "int8_bfloat16"),
        ("cuda", "float32", "on", "bfloat16"),
        ("cuda", "float32", "off", "float32"),
        ("cuda", "int8", "off", "int8_float32"),
        ("cuda", None, "auto", "default"),  # an export that does not record its weights
    ],
)
def test_ctranslate2_computes_in_half_precision_on_a_gpu(device, weights, bf16, compute_type):
    assert ct2_compute_type(device, weights, bf16) == compute_type
