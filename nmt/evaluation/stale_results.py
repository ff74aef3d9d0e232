"""Tables and figures under ``results/`` that the config no longer makes (a system or distillation removed),
found and removed so that none stays beside the current ones looking current."""

import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

# Figures named after a pair and its systems: a seed's learning curves ({pair}.{model}.{stage}.seed{N}.png) and the
# comparison of a pair's systems ({pair}.comparison.png); a multilingual system's (multilingual.{system}.seed{N}.png).
SYSTEM_PLOT = re.compile(r"([a-z]{2,3}-[a-z]{2,3}\.(comparison|\w+\.\w+\.seed\d+)|multilingual\.\w+\.seed\d+)\.png")
# The distillation table, its timing and its figure, under results/.
DISTILLATION_RESULTS = [
    "tables/distillation.md",
    "tables/distillation.csv",
    "tables/distillation_timing.json",
    "plots/distillation.png",
]


def stale_results(results: str | Path, plots: list[str | Path], distillation: bool) -> list[Path]:
    """The tables and figures in the folder ``results`` that the config no longer makes: figures named after
    systems (:data:`SYSTEM_PLOT`) other than ``plots``, and without ``distillation`` its table and figure.

    :param plots: every figure of a system the config makes (paths below ``results``)
    """
    results = Path(results)
    keep = {os.path.abspath(path) for path in plots}
    stale = [
        path
        for path in sorted((results / "plots").glob("*.png"))
        if SYSTEM_PLOT.fullmatch(path.name) and os.path.abspath(path) not in keep
    ]
    if not distillation:
        stale += [results / name for name in DISTILLATION_RESULTS if (results / name).is_file()]
    return stale


def remove_stale_results(results: str | Path, plots: list[str | Path], distillation: bool) -> list[Path]:
    """Remove the :func:`stale_results`, each with a warning, so that no table or figure of a system no longer
    configured (or of distillation switched off) stays beside the current ones looking current."""
    stale = stale_results(results, plots, distillation)
    for path in stale:
        log.warning("removing %s: the config no longer makes it (a system or distillation removed)", path)
        path.unlink()
    return stale
