"""Result tables: score records as a long table, aggregated over seeds, and in the wide shape of the literature."""

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from nmt.atomic import write_text
from nmt.errors import ConfigError, DataError
from nmt.evaluation.significance import SIGNIFICANCE_LEVEL

log = logging.getLogger(__name__)

# Columns in the order readers expect them; any other keys of the records follow.
COLUMNS = (
    "pair testset model arch size stage data seed bleu chrf ter bleu_lc_tok parameters train_seconds "
    "tokens_per_second steps device decode_device decode_precision"
).split()
# What identifies a system on a test set, apart from its seed.
SYSTEM = ["pair", "testset", "model", "arch", "size", "stage", "data"]
SCORES = ["bleu", "chrf", "ter", "bleu_lc_tok"]
# Scored only for the test sets with an official tokenized reference (corpora.NAME.tokenized_ref): the wide table
# shows it beside BLEU where it has a score, not as a metric of tables.metrics.
TOKENIZED_BLEU = "bleu_lc_tok"
COSTS = ["parameters", "train_seconds", "tokens_per_second", "models_trained", "shared_by"]
# The cost columns of a pair's group in the wide table (with ``costs``): the models a row trained (a multilingual
# model's once, with the number of pairs that share it) and their training minutes.
COST_NAMES = {"models_trained": "models", "train_seconds": "train min"}
# The seed of a record that scores the ensemble of all seeds' models.
ENSEMBLE = "ensemble"
# Marks of a system significantly better or worse than the baseline, by the metric's direction.
SIGNIFICANCE_MARKS = {"better": "†", "worse": "‖"}
# Markers of the published rows, one per kind of measurement; "†" and "‖" are taken by significance.
PUBLISHED_MARKS = ["*", "‡", "§", "¶"]
PUBLISHED_KEYS = ["system", "citation", "pair", "testset", "measurement"]
ARCH_NAMES = {"transformer": "Transformer", "rnn": "RNN", "convs2s": "ConvS2S"}
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "ter": "TER", "bleu_lc_tok": "BLEU (lc tok)"}


def collect_scores(score_files: list[str | Path], decoding_files: list[str | Path] = ()) -> pd.DataFrame:
    """One row per score record (system x seed x test set), sorted by pair, test set, model, stage and seed.

    :param decoding_files: the :func:`nmt.decoding.translation.decoding_record` of each record's translation (the
        records' ``hyp``), whose device and precision become the columns decode_device and decode_precision
    :raises DataError: for a score record whose translation has none of the decoding records
    """
    records = [json.loads(Path(f).read_text()) for f in score_files]
    decodings = [json.loads(Path(f).read_text()) for f in decoding_files]
    by_hyp = {os.path.normpath(decoding["hyp"]): decoding for decoding in decodings}
    for record in records if decodings else []:
        decoding = by_hyp.get(os.path.normpath(str(record.get("hyp"))))
        if decoding is None:
            raise DataError(f"scores: no decoding record (device, precision) of the translation {record.get('hyp')}")
        record["decode_device"], record["decode_precision"] = decoding["device"], decoding["precision"]
    df = pd.DataFrame.from_records(records)
    columns = [c for c in COLUMNS if c in df.columns] + [c for c in df.columns if c not in COLUMNS]
    order = [c for c in ("pair", "testset", "model", "stage", "seed") if c in df.columns]
    return df[columns].sort_values(order, key=_sort_key).reset_index(drop=True)


def _sort_key(column: pd.Series) -> pd.Series:
    """Sort key: the baseline stage before the back-translation variants, seeds in numeric order with the
    ensemble last, single runs before ensembles, other columns as they are."""
    if column.name == "stage":
        return column.where(column != "baseline", "")
    if column.name == "seed":
        return pd.to_numeric(column, errors="coerce").fillna(math.inf)
    if column.name == "kind":
        return column != "single"
    return column


def summarize_seeds(long: pd.DataFrame) -> pd.DataFrame:
    """Aggregate the long table over seeds: one row per system, test set and kind.

    A record whose ``seed`` is ``"ensemble"`` scores the ensemble of all seeds' models; it becomes a row of kind
    ``"ensemble"`` whose mean is its score, with no standard deviation and ``n_seeds`` the length of its
    ``members`` key (a list, or a count) when the record has one. All other records of a system are the
    ``"single"`` runs; a long table without a ``seed`` column is one run per system.

    :param long: the table of :func:`collect_scores`
    :return: columns pair, testset, model, arch, size, stage, data, kind, n_seeds, ``{metric}_mean``,
        ``{metric}_std`` (sample standard deviation, NaN for one seed), and the mean parameters, train_seconds,
        tokens_per_second
    """
    df = long.copy()
    for key in SYSTEM:
        df[key] = df[key].fillna("") if key in df.columns else ""
    seeds = df["seed"] if "seed" in df.columns else pd.Series(None, index=df.index, dtype=object)
    df["kind"] = seeds.map(seed_kind)
    metrics = [m for m in SCORES if m in df.columns]
    rows = []
    for key, group in df.groupby(SYSTEM + ["kind"], sort=False):
        row: dict[str, Any] = dict(zip(SYSTEM + ["kind"], key, strict=True))
        name = f"{row['pair']} {row['testset']} {row['model']} {row['stage']}"
        if row["kind"] == "ensemble":
            if len(group) > 1:
                raise DataError(f"{len(group)} ensemble records for {name}")
            row["n_seeds"] = _count_members(group.iloc[0].get("members"))
            for m in metrics:
                row[f"{m}_mean"], row[f"{m}_std"] = float(group[m].iloc[0]), math.nan
        else:
            duplicated = seeds[group.index].dropna()
            duplicated = duplicated[duplicated.duplicated()]
            if len(duplicated):
                raise DataError(f"two records of seed {duplicated.iloc[0]} for {name}")
            row["n_seeds"] = len(group)
            for m in metrics:
                row[f"{m}_mean"], row[f"{m}_std"] = group[m].mean(), group[m].std(ddof=1)
        for c in COSTS:
            if c in group.columns:
                row[c] = group[c].mean()
        rows.append(row)
    summary = pd.DataFrame(rows)
    return summary.sort_values(["pair", "testset", "model", "stage", "kind"], key=_sort_key).reset_index(drop=True)


def seed_kind(seed: Any) -> str:
    """``"ensemble"`` for the seed of an ensemble record, else ``"single"`` (also for a missing seed)."""
    return "ensemble" if isinstance(seed, str) and seed == ENSEMBLE else "single"


def _count_members(members: Any) -> float:
    """Number of models in an ensemble record's ``members`` (a list or a count); NaN when it has none."""
    if isinstance(members, list):
        return len(members)
    if isinstance(members, int | float) and not pd.isna(members):
        return int(members)
    return math.nan


def system_label(arch: str, size: str = "", data: str = "parallel", kind: str = "single") -> str:
    """Row label of a system, e.g. ``Transformer (base)`` or ``Transformer (base) ensemble, parallel+bt (beam5)``."""
    label = ARCH_NAMES.get(arch, arch)
    if size:
        label += f" ({size})"
    if kind == "ensemble":
        label += " ensemble"
    if data and data != "parallel":
        label += f", {data}"
    return label


def wide_table(
    summary: pd.DataFrame,
    metrics: tuple[str, ...] = ("bleu", "ter"),
    significance: pd.DataFrame | None = None,
    published: list[dict[str, Any]] | None = None,
    costs: bool = False,
) -> tuple[pd.DataFrame, list[str]]:
    """The table of a paper: one row per system, one column per language pair (and test set) and metric.

    Cells are strings: ``27.31 ± 0.12`` (mean ± sample standard deviation) over several seeds, ``27.31`` for one
    run, followed by ``†`` when the system is significantly better than the baseline or ``‖`` when it is
    significantly worse (p < 0.05 for every tested run of the row, all the same way; a lower TER is better), empty
    when there is no score. Published rows come first, labelled ``system [citation]`` plus a footnote marker per
    kind of measurement. A test set with ``bleu_lc_tok`` scores (:data:`TOKENIZED_BLEU`) gets that column right
    after its BLEU column, without significance marks (the bootstrap tests the sacreBLEU metrics), and a note.

    :param summary: the table of :func:`summarize_seeds`
    :param metrics: metric columns per pair, out of bleu, chrf, ter
    :param significance: the frame of :func:`nmt.evaluation.significance.significance_frame`: columns pair,
        testset, model, stage, seed, metric, p_value, direction (and baseline_arch, baseline_size, baseline_data,
        baseline_seed for the note)
    :param published: results from papers, each a dict with keys system, citation, pair, testset, measurement
        (e.g. ``tokenized BLEU (multi-bleu.perl), not sacreBLEU``) and a value for some of ``metrics`` or
        ``bleu_lc_tok``
    :param costs: add :data:`COST_NAMES` columns to each group (:func:`cost_cells`), with a note
    :return: the table (index: system labels; columns: MultiIndex of ``EN-DE`` or ``EN-DE {testset}``, metric
        name) and its footnotes, one line each
    """
    published = published or []
    _check_wide_inputs(metrics, published)
    testsets = sorted(
        set(summary[["pair", "testset"]].itertuples(index=False, name=None))
        | {(r["pair"], r["testset"]) for r in published}
    )
    per_pair = pd.Series([p for p, _ in testsets]).value_counts()
    heading = {(p, t): p.upper() + (f" {t}" if per_pair[p] > 1 else "") for p, t in testsets}
    tokenized = _tokenized_testsets(summary, published) if "bleu" in metrics else set()
    shown = {key: [METRIC_NAMES[m] for m in _shown(metrics, key in tokenized)] for key in testsets}
    shown = {key: names + (list(COST_NAMES.values()) if costs else []) for key, names in shown.items()}
    columns = [(heading[key], name) for key in testsets for name in shown[key]]
    filled = _shown(metrics, True)

    cells: dict[str, dict[tuple[str, str], str]] = {}
    notes = []
    marks = {}
    for result in published:
        if result["measurement"] not in marks:
            marks[result["measurement"]] = PUBLISHED_MARKS[len(marks) % len(PUBLISHED_MARKS)]
            notes.append(
                f"{marks[result['measurement']]} As published, measured with {result['measurement']}: "
                "a different measurement, not comparable with the sacreBLEU scores of the other rows."
            )
        label = f"{result['system']} [{result['citation']}]{marks[result['measurement']]}"
        row = cells.setdefault(label, {})
        for m in filled:
            if result.get(m) is not None:
                row[heading[result["pair"], result["testset"]], METRIC_NAMES[m]] = str(result[m])

    labels = _system_labels(summary)
    tested = _significant(summary, significance, metrics) if significance is not None else {}
    for i, row in summary.iterrows():
        target = cells.setdefault(labels[i], {})
        for m in filled:
            mean, std = row.get(f"{m}_mean"), row.get(f"{m}_std")
            if mean is None or pd.isna(mean):
                continue
            text = f"{mean:.2f} ± {std:.2f}" if row["n_seeds"] > 1 and not pd.isna(std) else f"{mean:.2f}"
            target[heading[row["pair"], row["testset"]], METRIC_NAMES[m]] = text + tested.get((i, m), "")
        if costs:
            target |= {(heading[row["pair"], row["testset"]], name): text for name, text in cost_cells(row).items()}
    if tested:
        row_labels = {(r["pair"], r["model"], r["stage"], r["kind"]): labels[i] for i, r in summary.iterrows()}
        notes.append(_significance_note(significance, set(tested.values()), row_labels))
    notes += ([TOKENIZED_BLEU_NOTE] if tokenized else []) + ([COSTS_NOTE] if costs else [])

    table = pd.DataFrame(
        [[row.get(c, "") for c in columns] for row in cells.values()],
        index=pd.Index(list(cells), name="system"),
        columns=pd.MultiIndex.from_tuples(columns),
    )
    return table, notes


def cost_cells(row: pd.Series) -> dict[str, str]:
    """The cost cells of a summary row: the models it trained (``1``; a pivot cascade's ``2``; an ensemble's every
    seed; ``1, shared by 4 pairs`` for a multilingual model) and their training minutes (mean over seeds)."""
    models, shared, seconds = (row.get(key) for key in ("models_trained", "shared_by", "train_seconds"))
    cells = {name: "" for name in COST_NAMES.values()}
    if models is not None and not pd.isna(models):
        shares = f", shared by {shared:.0f} pairs" if shared is not None and not pd.isna(shared) else ""
        cells[COST_NAMES["models_trained"]] = f"{models:.0f}{shares}"
    if seconds is not None and not pd.isna(seconds):
        cells[COST_NAMES["train_seconds"]] = f"{seconds / 60:.1f}"
    return cells


# The footnote of the cost columns.
COSTS_NOTE = (
    "models, train min: the models a row trained and their training minutes (validation not counted): a pivot "
    "cascade's both steps, an ensemble's every seed; a multilingual model's once, shown in the group of every pair it "
    "serves (shared by N pairs: its directions, trained and zero-shot)."
)


def _check_wide_inputs(metrics: tuple[str, ...], published: list[dict[str, Any]]) -> None:
    """Raise ConfigError on a metric the wide table does not know or a published result without a needed key."""
    for m in metrics:
        if m not in METRIC_NAMES:
            raise ConfigError(f"wide table: unknown metric {m!r}, expected one of {', '.join(METRIC_NAMES)}")
    for i, result in enumerate(published):
        for key in PUBLISHED_KEYS:
            if key not in result:
                raise ConfigError(f"published result {i + 1}: missing key {key!r}")


def _tokenized_testsets(summary: pd.DataFrame, published: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The (pair, test set)s where a system of ``summary`` or a published result has a :data:`TOKENIZED_BLEU` score."""
    found = {(r["pair"], r["testset"]) for r in published if r.get(TOKENIZED_BLEU) is not None}
    column = f"{TOKENIZED_BLEU}_mean"
    if column in summary.columns:
        scored = summary[summary[column].notna()]
        found |= set(scored[["pair", "testset"]].itertuples(index=False, name=None))
    return found


def _shown(metrics: tuple[str, ...], tokenized: bool) -> list[str]:
    """The metric columns of a test set: ``metrics``, with :data:`TOKENIZED_BLEU` after BLEU where ``tokenized``."""
    if not tokenized or TOKENIZED_BLEU in metrics:
        return list(metrics)
    return [shown for m in metrics for shown in ((m, TOKENIZED_BLEU) if m == "bleu" else (m,))]


def _system_labels(summary: pd.DataFrame) -> dict[Any, str]:
    """Row label of every summary row; systems that would share a label get their model and stage added."""
    labels = {i: system_label(r["arch"], r["size"], r["data"], r["kind"]) for i, r in summary.iterrows()}
    systems: dict[str, set] = {}
    for i, r in summary.iterrows():
        systems.setdefault(labels[i], set()).add((r["model"], r["stage"]))
    return {
        i: label if len(systems[label]) == 1 else f"{label} ({summary.at[i, 'model']}, {summary.at[i, 'stage']})"
        for i, label in labels.items()
    }


def _significant(summary: pd.DataFrame, significance: pd.DataFrame, metrics: tuple[str, ...]) -> dict:
    """``{(summary row, metric): mark}`` where every tested run of the row differs significantly from the baseline,
    all of them the same way: :data:`SIGNIFICANCE_MARKS` of that direction."""
    columns = ("pair", "testset", "model", "stage", "seed", "metric", "p_value", "direction")
    missing = [c for c in columns if c not in significance]
    if missing:
        raise DataError(f"significance frame: missing column {missing[0]!r}")
    tests = significance.assign(kind=significance["seed"].map(seed_kind))
    tests = tests[tests["p_value"].notna()]
    marks = {}
    for i, row in summary.iterrows():
        for m in metrics:
            runs = tests.loc[
                (tests["pair"] == row["pair"])
                & (tests["testset"] == row["testset"])
                & (tests["model"] == row["model"])
                & (tests["stage"] == row["stage"])
                & (tests["kind"] == row["kind"])
                & (tests["metric"] == m)
            ]
            directions = set(runs["direction"])
            if len(runs) and (runs["p_value"] < SIGNIFICANCE_LEVEL).all() and len(directions) == 1:
                marks[i, m] = SIGNIFICANCE_MARKS[directions.pop()]
    return marks


def _significance_note(significance: pd.DataFrame, used: set[str], row_labels: dict[tuple, str]) -> str:
    """The footnote of the significance marks ``used``, naming the baseline system(s) when the frame says which: by
    their row labels (``row_labels``: (pair, model, stage, kind) -> label), per pair where pairs differ in it."""
    baselines = ""
    if {"baseline_arch", "baseline_size", "baseline_data", "baseline_seed"} <= set(significance.columns):
        per_pair: dict[str, dict[str, None]] = {}
        for row in significance.to_dict("records"):
            per_pair.setdefault(row["pair"], {})[_baseline_label(row, row_labels)] = None
        pairs_of: dict[str, list[str]] = {}
        for pair, names in per_pair.items():
            pairs_of.setdefault("; ".join(names), []).append(pair.upper())
        if len(pairs_of) == 1:
            baselines = f" ({next(iter(pairs_of))})"
        else:
            baselines = " (" + "; ".join(f"{', '.join(pairs)}: {names}" for names, pairs in pairs_of.items()) + ")"
    marks = ", ".join(f"{mark} significantly {way}" for way, mark in SIGNIFICANCE_MARKS.items() if mark in used)
    return (
        f"{marks} than the baseline system{baselines} at p < {SIGNIFICANCE_LEVEL} (better: a higher BLEU or chrF, "
        "a lower TER; sacreBLEU paired bootstrap resampling; over several seeds: for every seed, the same way)."
    )


def _baseline_label(row: dict[str, Any], row_labels: dict[tuple, str]) -> str:
    """The row label of the system a significance record tests against; from its architecture where the table
    has no such row (a frame without baseline_model)."""
    kind = seed_kind(row["baseline_seed"])
    key = (row["pair"], row.get("baseline_model"), row.get("baseline_stage"), kind)
    return row_labels.get(key) or system_label(row["baseline_arch"], row["baseline_size"], row["baseline_data"], kind)


# The footnote of the BLEU (lc tok) column: what it counts and which figures it compares with (docs/results.md).
TOKENIZED_BLEU_NOTE = (
    "BLEU (lc tok): BLEU of the lowercased, punctuation-normalized, Moses-tokenized translation against the test "
    "set's official tokenized reference (as multi-bleu.perl -lc counts it: sacreBLEU with tokenize none, lowercase, "
    "no smoothing), the figure papers on these test sets publish (e.g. Multi30k's); BLEU is cased sacreBLEU on the "
    "detokenized text. No significance marks: the paired bootstrap tests the sacreBLEU metrics."
)


def decoding_notes(long: pd.DataFrame) -> list[str]:
    """A note for the tables, and a warning in the log, when the runs were decoded on different devices or in
    different precisions (``auto`` on a laptop and then on a GPU node): which runs on which. None otherwise.

    :param long: the table of :func:`collect_scores`, with decode_device and decode_precision
    """
    if not {"decode_device", "decode_precision"} <= set(long.columns):
        return []
    kinds = long["decode_device"].astype(str) + " " + long["decode_precision"].astype(str)
    if kinds.nunique() <= 1:
        return []
    runs = long["pair"] + " " + long["model"] + "/" + long["stage"] + "/" + long["seed"].map(_run_name)
    groups = {kind: list(dict.fromkeys(runs[kinds == kind])) for kind in dict.fromkeys(kinds)}
    note = "Decoded on different devices or in different precisions (decode_device, decode_precision of scores.csv): "
    note += "; ".join(f"{kind}: {', '.join(names)}" for kind, names in groups.items()) + "."
    log.warning("%s", note)
    return [note]


def budget_notes(long: pd.DataFrame) -> list[str]:
    """A note per model trained on several data (the parallel data, back-translation variants): what its systems'
    trainings held equal, the updates, or else how many each trained, with their training minutes (first seed).

    :param long: the table of :func:`collect_scores`, with steps and train_seconds
    """
    if not {"steps", "train_seconds"} <= set(long.columns):
        return []
    singles = long[long["seed"].map(seed_kind) == "single"].drop_duplicates(["pair", "model", "stage"])
    models = singles.drop_duplicates(["model"])
    labels = dict(zip(models["model"], map(system_label, models["arch"], models["size"]), strict=True))
    shared = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    notes = []
    for (pair, model), runs in singles.groupby(["pair", "model"], sort=False):
        if len(runs) < 2:
            continue
        label = labels[model] + (f" ({model})" if labels[model] in shared else "")  # as the rows tell them apart
        minutes = "; ".join(
            f"{data} {seconds / 60:.1f}" for data, seconds in zip(runs["data"], runs["train_seconds"], strict=True)
        )
        steps = sorted(set(runs["steps"].astype(int)))
        held = f"{steps[0]:,} updates each (held equal)" if len(steps) == 1 else "different numbers of updates: "
        if len(steps) > 1:
            held += "; ".join(f"{d} {n:,}" for d, n in zip(runs["data"], runs["steps"].astype(int), strict=True))
        notes.append(f"{pair.upper()} {label}: the systems trained {held}; training minutes: {minutes}.")
    return notes


def _run_name(seed: Any) -> str:
    return ENSEMBLE if seed_kind(seed) == "ensemble" else f"seed{seed}"


def write_wide(
    df: pd.DataFrame, notes: list[str], md_path: str | Path, tex_path: str | Path, csv_path: str | Path | None = None
) -> None:
    """Write the table of :func:`wide_table` as Markdown and as a LaTeX booktabs tabular, each followed by its
    notes, and optionally as CSV (flat column names, no notes), atomically."""
    flat = df.copy()
    flat.columns = [" ".join(c) for c in df.columns]
    if csv_path is not None:
        write_text(csv_path, flat.to_csv())
    markdown = flat.to_markdown(disable_numparse=True, colalign=["left"] + ["right"] * len(flat.columns))
    # A note starting with "*" would become a Markdown list item.
    markdown += "\n\n" + "".join(("\\" + n if n.startswith("*") else n) + "\n\n" for n in notes)
    write_text(md_path, markdown.rstrip("\n") + "\n")

    tex = df.map(_latex_text)
    tex.index = [_latex_text(label) for label in df.index]
    tex.columns = pd.MultiIndex.from_tuples([tuple(_latex_text(c) for c in column) for column in df.columns])
    latex = tex.to_latex(escape=False, column_format="l" + "r" * len(df.columns), multicolumn_format="c")
    if notes:
        latex += "\\par\\smallskip\n{\\footnotesize\n" + "\\\\\n".join(_latex_text(n) for n in notes) + "\n}\n"
    write_text(tex_path, latex)


# LaTeX specials, then the marks this module writes, in text mode.
LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",
    ">": r"$>$",
    "±": r"$\pm$",
    "†": r"\textsuperscript{\dag}",
    "‡": r"\textsuperscript{\ddag}",
    "‖": r"\textsuperscript{$\|$}",
    "§": r"\S{}",
    "¶": r"\P{}",
}


def _latex_text(text: str) -> str:
    return "".join(LATEX.get(char, char) for char in str(text))


def write_tables(df: pd.DataFrame, csv_path: str | Path, md_path: str | Path | None = None) -> None:
    """Write the full table as CSV and, optionally, the readable columns (no signatures) as Markdown, atomically."""
    write_text(csv_path, df.to_csv(index=False))
    if md_path is not None:
        readable = df[[c for c in df.columns if not c.endswith("_signature")]]
        write_text(md_path, readable.to_markdown(index=False) + "\n")
