"""Result tables: every score record of a run in one pandas DataFrame, written as CSV and Markdown."""

import json
import os
from pathlib import Path

import pandas as pd

# Columns in the order readers expect them; any other keys of the records follow.
COLUMNS = [
    "pair", "testset", "model", "arch", "stage", "data", "bleu", "chrf", "ter",
    "parameters", "train_seconds", "tokens_per_second", "steps", "device",
]  # fmt: skip


def collect_scores(score_files: list[str | Path]) -> pd.DataFrame:
    """One row per score record (system x test set), sorted by pair, test set and model."""
    records = [json.loads(Path(f).read_text()) for f in score_files]
    df = pd.DataFrame.from_records(records)
    columns = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    return df[columns].sort_values(["pair", "testset", "model", "stage"], key=_baseline_first).reset_index(drop=True)


def _baseline_first(column: pd.Series) -> pd.Series:
    """Sort key: the baseline stage before the back-translation variants, other columns as they are."""
    return column.where(column != "baseline", "") if column.name == "stage" else column


def write_tables(df: pd.DataFrame, csv_path: str | Path, md_path: str | Path) -> None:
    """Write the full table as CSV and the readable columns (no signatures) as Markdown, atomically."""
    for path, text in (
        (Path(csv_path), df.to_csv(index=False)),
        (
            Path(md_path),
            df[[c for c in df.columns if not c.endswith("_signature")]].to_markdown(index=False) + "\n",
        ),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
