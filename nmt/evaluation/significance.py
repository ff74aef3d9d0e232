"""Paired bootstrap resampling (Koehn 2004) of BLEU, chrF and TER against a baseline, with sacrebleu's own test,
and the direction of each difference."""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from sacrebleu.significance import PairedTest

from nmt.atomic import read_lines, write_text
from nmt.errors import ConfigError, DataError
from nmt.evaluation.metrics import LOWER_IS_BETTER, METRICS

SIGNIFICANCE_LEVEL = 0.05  # a system differs from the baseline at p below it

# Fields of a test record, in the order of the TSV columns.
FIELDS = [
    "system",
    "metric",
    "score",
    "mean",
    "ci95",
    "p_value",
    "significant",
    "direction",
    "baseline",
    "n_samples",
    "seed",
    "hyp",
    "baseline_hyp",
    "ref",
    "signature",
]


def paired_bootstrap(
    ref_path: str | Path,
    hyps: dict[str, str | Path],
    baseline: str,
    trg_lang: str = "",
    n_samples: int = 1000,
    seed: int = 12345,
) -> list[dict[str, Any]]:
    """Test every system against the baseline with sacrebleu's paired bootstrap resampling (``--paired-bs``).

    All systems are scored on the same ``n_samples`` resamples of the test set (drawn with ``seed``). The p-value
    is that of sacrebleu: the share of resamples whose centred score difference exceeds the observed one. A
    system whose score equals the baseline's gets p = 1, where sacrebleu's strict comparison would give
    1 / (n_samples + 1) for an exact copy of the baseline. The test is two-sided (sacrebleu compares absolute
    differences), so each record says which way the system differs: ``direction``.

    :param ref_path: the reference translation, one sentence per line
    :param hyps: system name -> detokenized translation of the same test set; includes the baseline
    :param baseline: the name in ``hyps`` of the system the others are compared with
    :param trg_lang: target language code, which picks BLEU's tokenizer as in
        :func:`nmt.evaluation.metrics.score_corpus`
    :return: one record per system and metric (bleu, chrf, ter), the baseline first: score, mean and ci95 (the
        bootstrap mean and half the width of its 95% interval, as sacrebleu reports them), p_value and
        significant (None and False for the baseline), direction (:func:`direction`), with the test's sacrebleu
        signature
    """
    if baseline not in hyps:
        raise DataError(f"paired bootstrap: baseline {baseline!r} is not one of the systems {', '.join(hyps)}")
    if seed <= 0:
        # sacrebleu seeds the systems' resamples with `seed or None`, so 0 would not be reproducible.
        raise ConfigError(f"paired bootstrap: seed must be a positive integer, got {seed}")
    refs = read_lines(ref_path)
    names = [baseline] + [name for name in hyps if name != baseline]
    systems = []
    for name in names:
        lines = read_lines(hyps[name])
        if len(lines) != len(refs):
            raise DataError(f"{hyps[name]} has {len(lines)} lines but {ref_path} has {len(refs)}")
        systems.append((name, lines))

    metrics = {name: make(trg_lang) for name, make in METRICS.items()}
    # PairedTest reads its seed from the environment, as the sacrebleu command line sets it.
    with _environment(SACREBLEU_SEED=str(seed)):
        test = PairedTest(systems, metrics, [refs], test_type="bs", n_samples=n_samples)
    signatures, results = test()

    records = []
    # PairedTest keys its results by the metric's display name (BLEU, chrF2, TER), in the order of `metrics`.
    for metric, display in zip(metrics, test.metrics, strict=True):
        baseline_score = results[display][0].score
        for (name, _), result in zip(systems, results[display], strict=True):
            p_value = None if name == baseline else (1.0 if result.score == baseline_score else result.p_value)
            records.append(
                {
                    "system": name,
                    "metric": metric,
                    "score": result.score,
                    "mean": float(result.mean),
                    "ci95": float(result.ci),
                    "p_value": p_value,
                    "significant": p_value is not None and p_value < SIGNIFICANCE_LEVEL,
                    "direction": None if name == baseline else direction(metric, result.score, baseline_score),
                    "baseline": baseline,
                    "n_samples": test.n_samples,
                    "seed": seed,
                    "hyp": str(hyps[name]),
                    "baseline_hyp": str(hyps[baseline]),
                    "ref": str(ref_path),
                    "signature": str(signatures[display]),
                }
            )
    return records


def direction(metric: str, score: float, baseline_score: float) -> str | None:
    """``"better"`` or ``"worse"``: how ``score`` compares with the baseline's by the metric's direction (a lower
    TER is better, a higher BLEU or chrF); None for equal scores."""
    if score == baseline_score:
        return None
    return "better" if (score < baseline_score) == (metric in LOWER_IS_BETTER) else "worse"


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of a block, then restore them."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def write_significance(records: list[dict[str, Any]], path: str | Path) -> None:
    """Write test records atomically as JSON (``.json``) or tab-separated values (any other suffix)."""
    path = Path(path)
    if path.suffix == ".json":
        text = json.dumps(records, indent=2) + "\n"
    else:
        text = pd.DataFrame.from_records(records, columns=FIELDS).to_csv(sep="\t", index=False)
    write_text(path, text)


def read_significance(path: str | Path) -> list[dict[str, Any]]:
    """Read the records of :func:`write_significance` back (the baseline's p_value is None in both formats)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    text = {name: str for name in ("system", "direction", "baseline", "hyp", "baseline_hyp", "ref", "signature")}
    df = pd.read_csv(path, sep="\t", dtype=text)
    if list(df.columns) != FIELDS:
        raise DataError(f"{path}: expected columns {', '.join(FIELDS)}, found {', '.join(df.columns)}")
    return df.astype(object).where(df.notna(), None).to_dict("records")


# What the significance frame records of the system each run is tested against (as baseline_arch, ...).
BASELINE_KEYS = ("arch", "size", "data", "seed", "model", "stage")


def significance_frame(records: list[dict[str, Any]], long: pd.DataFrame) -> pd.DataFrame:
    """The ``significance`` frame of :func:`nmt.evaluation.tables.wide_table`: test records joined to the score records
    of the long table by the path of the translation they test (the records' ``hyp``).

    :param long: the table of :func:`nmt.evaluation.tables.collect_scores`, with hyp and seed columns
    :return: columns pair, testset, model, stage, seed, metric, p_value, direction, and baseline_ of each of
        :data:`BASELINE_KEYS`, naming the system tested against
    :raises DataError: for a record of no score record
    """
    for column in ("hyp", "seed"):
        if column not in long.columns:
            raise DataError(f"significance: the score records have no {column!r} key")
    systems = {os.path.normpath(str(hyp)): row for hyp, row in zip(long["hyp"], long.to_dict("records"), strict=True)}
    rows = []
    for record in records:
        system, baseline = (_system_of(systems, record[key]) for key in ("hyp", "baseline_hyp"))
        rows.append(
            {
                **{key: system.get(key, "") for key in ("pair", "testset", "model", "stage", "seed")},
                "metric": record["metric"],
                "p_value": record["p_value"],
                "direction": record["direction"],
                **{f"baseline_{key}": baseline.get(key, "") for key in BASELINE_KEYS},
            }
        )
    columns = ["pair", "testset", "model", "stage", "seed", "metric", "p_value", "direction"]
    return pd.DataFrame(rows, columns=columns + [f"baseline_{key}" for key in BASELINE_KEYS])


def _system_of(systems: dict[str, dict[str, Any]], hyp: str) -> dict[str, Any]:
    system = systems.get(os.path.normpath(str(hyp)))
    if system is None:
        raise DataError(f"significance: {hyp} is the translation of no score record")
    return system
