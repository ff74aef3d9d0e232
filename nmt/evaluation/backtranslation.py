"""The table of a variant's rounds of iterative back-translation (Hoang et al. 2018): per round, the dev BLEU of the
reverse model that back-translated (and of the forward model whose translations it trained on) and the sizes of the
corpora they made, so that a reader sees whether a round's better reverse model gave a better corpus."""

import json
from pathlib import Path
from typing import Any

from nmt.atomic import read_json, write_text
from nmt.errors import DataError


def model_dev_bleu(summary: dict[str, Any]) -> float:
    """The dev BLEU of the model a training wrote as ``model.pt``: the average of its last checkpoints when that is
    what it kept, else its best checkpoint (``summary["model"]`` says which)."""
    chosen = summary["averaged"] if summary["model"].startswith("average") else summary["valid"]
    return chosen["bleu"]


def tabulate_rounds(
    reverse: list[str | Path],
    synthetic: list[str | Path],
    forward: list[str | Path],
    forward_corpus: list[str | Path],
    json_out: str | Path,
    md_out: str | Path,
) -> list[dict[str, Any]]:
    """Write the rounds of a variant as JSON (one record per round) and as a Markdown table.

    :param reverse: each round's reverse model's ``summary.json``, round 1 first
    :param synthetic: each round's synthetic corpus ``report.json`` (:func:`nmt.data.synthetic.build_synthetic_corpus`)
    :param forward: each later round's forward model's ``summary.json``, round 2 first
    :param forward_corpus: each later round's forward-translated corpus ``report.json``, round 2 first
    :return: the records: ``round``, the models' folders and dev BLEU, the corpora's pairs in and kept
    :raises DataError: naming a file that is missing, not JSON, or lacks a key of its kind
    """
    if len(forward) != len(reverse) - 1 or len(forward_corpus) != len(forward) or len(synthetic) != len(reverse):
        raise DataError(f"{json_out}: {len(reverse)} rounds need as many synthetic corpora and one forward model less")
    rows = []
    for k, (reverse_path, corpus_path) in enumerate(zip(reverse, synthetic, strict=True), start=1):
        row = {"round": k, **_model("reverse", reverse_path), **_corpus("synthetic", corpus_path)}
        if k > 1:
            row |= _model("forward", forward[k - 2]) | _corpus("forward_corpus", forward_corpus[k - 2])
        rows.append(row)
    write_text(json_out, json.dumps(rows, indent=2) + "\n")
    write_text(md_out, _markdown(rows))
    return rows


def _model(role: str, summary_path: str | Path) -> dict[str, Any]:
    summary = read_json(summary_path)
    try:
        return {f"{role}_model": str(Path(summary_path).parent), f"{role}_dev_bleu": model_dev_bleu(summary)}
    except (KeyError, AttributeError, TypeError) as e:
        raise DataError(f"{summary_path}: not a training summary (no {e})") from e


def _corpus(role: str, report_path: str | Path) -> dict[str, Any]:
    report = read_json(report_path)
    try:
        return {f"{role}_in": report["synthetic_in"], f"{role}_pairs": report["synthetic_pairs"]}
    except (KeyError, TypeError) as e:
        raise DataError(f"{report_path}: not a synthetic corpus report (no {e})") from e


def _markdown(rows: list[dict[str, Any]]) -> str:
    """The rounds as a Markdown table; round 1 has no forward model (its reverse model trains on the real pairs)."""
    lines = [
        "| round | forward model dev BLEU | forward-translated pairs kept | reverse model | reverse model dev BLEU "
        "| synthetic pairs kept |",
        "|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        cells = [str(row["round"]), "–", "–"]
        if "forward_dev_bleu" in row:
            kept = f"{row['forward_corpus_pairs']:,} of {row['forward_corpus_in']:,}"
            cells[1:] = [f"{row['forward_dev_bleu']:.2f}", kept]
        cells += [f"`{row['reverse_model']}`", f"{row['reverse_dev_bleu']:.2f}"]
        cells.append(f"{row['synthetic_pairs']:,} of {row['synthetic_in']:,}")
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"
