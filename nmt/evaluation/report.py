"""HTML pages of the result tables and the data reports, which Snakemake's report shows on the page.

Snakemake's report embeds an ``.html`` item and shows it inline (in a frame); a CSV or JSON item is only a
download link. Each page here is standalone: one HTML file with its style, no scripts, no external files.
"""

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nmt.atomic import read_json, write_text
from nmt.errors import DataError
from nmt.evaluation.significance import SIGNIFICANCE_LEVEL, significance_frame
from nmt.evaluation.tables import METRIC_NAMES, SCORES, SIGNIFICANCE_MARKS

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 14px;
       margin: 1.5em; color: #1f2937; }
h1 { font-size: 1.3em; margin: 0 0 0.8em; }
h2 { font-size: 1.05em; margin: 1.6em 0 0.5em; }
table { border-collapse: collapse; margin-bottom: 0.5em; }
th, td { border: 1px solid #d1d5db; padding: 0.3em 0.7em; }
th { background: #f3f4f6; text-align: left; }
td { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.text, tbody th { text-align: left; }
p.note { margin: 0.3em 0; color: #4b5563; max-width: 60em; }
"""

# Footnote of the significance page: what the difference and the p-value mean.
SIGNIFICANCE_NOTE = (
    "Paired bootstrap resampling (sacreBLEU) of each run against the baseline run (first row). "
    "Δ is the run's score minus the baseline's: higher is better for BLEU and chrF, lower for TER. "
    "p is the share of resamples with a difference at least as large in either direction if the two systems "
    f"were equal (a two-sided test); p < {SIGNIFICANCE_LEVEL} is significant, marked as in the main table: "
    f"{SIGNIFICANCE_MARKS['better']} better, {SIGNIFICANCE_MARKS['worse']} worse than the baseline. "
    "95% CI: the bootstrap mean ± half the width of its 95% interval."
)


def html_page(title: str, sections: Sequence[tuple[str, pd.DataFrame]], notes: Sequence[str] = ()) -> str:
    """A standalone HTML page: a title, then each section's heading and its table, then the notes.

    Cells are written as they are (format numbers before); a string cell is left-aligned, every other cell
    right-aligned. Text is escaped.

    :param sections: (heading, table) pairs; an empty heading writes the table alone
    :param notes: paragraphs under the tables, e.g. footnotes of their marks
    """
    body = [f"<h1>{html.escape(title)}</h1>"]
    for heading, df in sections:
        if heading:
            body.append(f"<h2>{html.escape(heading)}</h2>")
        body.append(_html_table(df))
    body += [f'<p class="note">{html.escape(note)}</p>' for note in notes]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _html_table(df: pd.DataFrame) -> str:
    """The table as HTML; text cells get the class ``text`` (left-aligned)."""
    if df.index.nlevels > 1 or df.index.name is not None:  # row labels as the first columns, headed by their names
        df = df.reset_index()
    text = df.map(lambda v: isinstance(v, str) and not _is_number(v))
    table = df.astype(object).where(df.notna(), "").to_html(escape=True, border=0, index=False)
    if not text.to_numpy().any():
        return table
    # pandas writes no per-cell classes: mark the text cells in the order to_html writes them (row-major).
    cells = iter(text.to_numpy().ravel().tolist())
    parts = table.split("<td>")
    return parts[0] + "".join(('<td class="text">' if next(cells) else "<td>") + part for part in parts[1:])


def _is_number(text: str) -> bool:
    """Whether a cell's text reads as a number (``27.31``, ``27.31 ± 0.12``, ``1,234``, ``12.5%``, ``+0.80``)."""
    head = text.split(" ")[0].rstrip("%†*‡§¶").replace(",", "").replace("−", "-")
    try:
        float(head)
    except ValueError:
        return False
    return True


def write_page(
    path: str | Path, title: str, sections: Sequence[tuple[str, pd.DataFrame]], notes: Sequence[str] = ()
) -> None:
    """Write :func:`html_page` atomically."""
    write_text(path, html_page(title, sections, notes))


def _mark(p_value: float, direction: str | None) -> str:
    """`` †`` or `` ‖`` after a significant p-value, by the direction of the difference (``*`` without one)."""
    if p_value >= SIGNIFICANCE_LEVEL:
        return ""
    return " " + SIGNIFICANCE_MARKS.get(direction, "*")


def write_result_pages(
    long: pd.DataFrame,
    summary: pd.DataFrame,
    wide: pd.DataFrame,
    notes: list[str],
    tests: list[dict[str, Any]],
    table_html: str | Path,
    summary_html: str | Path,
    scores_html: str | Path,
    significance_html: str | Path,
) -> None:
    """The pages of the result tables: the wide table with its notes, the per-system summary, every run, and the
    significance tests.

    :param long: the table of :func:`nmt.evaluation.tables.collect_scores`
    :param summary: the table of :func:`nmt.evaluation.tables.summarize_seeds`
    :param wide: the table and ``notes`` of :func:`nmt.evaluation.tables.wide_table`
    :param tests: the records of :func:`nmt.evaluation.significance.read_significance`, every test set's
    """
    flat = wide.copy()
    flat.columns = [" ".join(c) for c in wide.columns]
    write_page(table_html, "Main results: systems × language pairs and metrics", [("", flat)], notes)
    write_page(summary_html, "Per system: mean ± sample std over seeds, and the ensembles", [("", _rounded(summary))])
    readable = long[[c for c in long.columns if not c.endswith("_signature") and c not in ("hyp", "ref")]]
    signatures = [
        f"{column.removesuffix('_signature')}: {signature}"
        for column in long.columns
        if column.endswith("_signature")
        for signature in long[column].dropna().unique()
    ]
    write_page(scores_html, "Every run and test set", [("", _rounded(readable))], signatures)
    sections = significance_sections(tests, long)
    write_page(significance_html, "Significance against the baseline", sections, [SIGNIFICANCE_NOTE] if tests else [])


def _rounded(df: pd.DataFrame) -> pd.DataFrame:
    """Scores with 2 decimals, other floats with at most 2, counts with thousands separators, NaN empty."""
    out = df.astype(object).copy()
    for column in df.columns:
        values = df[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            continue
        whole = values.dropna().eq(values.dropna().round()).all()
        if whole and not column.endswith(("_mean", "_std")) and column not in SCORES:
            out[column] = values.map(lambda v: "" if pd.isna(v) else f"{int(v):,}")
        else:
            out[column] = values.map(lambda v: "" if pd.isna(v) else f"{v:.2f}")
    return out


def significance_sections(tests: list[dict[str, Any]], long: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One table per language pair and test set: a row per tested run (the baseline first), and per metric its
    score, the bootstrap mean ± 95% CI, the difference to the baseline (Δ) and the p-value, † where p is below
    the significance level. A ``direction`` key of the records, where they have one, is shown as its own column.

    :param tests: test records (:func:`nmt.evaluation.significance.paired_bootstrap`)
    :param long: the score records they test, with ``hyp`` (see :func:`nmt.evaluation.significance.significance_frame`)
    """
    if not tests:
        return []
    frame = significance_frame(tests, long)  # a row per record, in the records' order
    rows = []
    for record, (_, system) in zip(tests, frame.iterrows(), strict=True):
        baseline = record["hyp"] == record["baseline_hyp"]
        p = record["p_value"]
        row = {
            "pair": system["pair"],
            "testset": system["testset"],
            "model": system["model"],
            "stage": system["stage"],
            "run": _run_name(system["seed"]),
            "metric": record["metric"],
            "score": f"{record['score']:.2f}",
            "95% CI": f"{record['mean']:.2f} ± {record['ci95']:.2f}",
            "Δ": "baseline" if baseline else f"{record['score'] - _baseline_score(tests, record):+.2f}",
            "p": "" if p is None else f"{p:.4f}" + _mark(p, record.get("direction")),
        }
        if "direction" in record:
            row["direction"] = record["direction"] or ""
        rows.append(row)
    df = pd.DataFrame(rows)
    sections = []
    for (pair, testset), group in df.groupby(["pair", "testset"], sort=False):
        metrics = list(dict.fromkeys(group["metric"]))
        values = [c for c in df.columns if c not in ("pair", "testset", "model", "stage", "run", "metric")]
        table = group.pivot(index=["model", "stage", "run"], columns="metric", values=values).swaplevel(axis=1)
        table = table.reindex(columns=pd.MultiIndex.from_product([metrics, values]), fill_value="")
        table.columns = pd.MultiIndex.from_tuples([(METRIC_NAMES.get(m, m), v) for m, v in table.columns])
        order = list(dict.fromkeys(zip(group["model"], group["stage"], group["run"], strict=True)))
        sections.append((f"{pair.upper()} {testset}", table.loc[order]))
    return sections


def _run_name(seed: Any) -> str:
    """A run as the results paths name it: ``seed1``, or ``ensemble``."""
    text = str(seed)
    return text if not text or text == "ensemble" else f"seed{text}"


def _baseline_score(tests: list[dict[str, Any]], record: dict[str, Any]) -> float:
    """The baseline's score of the record's metric on the same test (the records of one test share a reference)."""
    for other in tests:
        if other["hyp"] == record["baseline_hyp"] and other["metric"] == record["metric"]:
            if other["ref"] == record["ref"]:
                return other["score"]
    raise DataError(f"significance: no record of the baseline {record['baseline_hyp']} for {record['metric']}")


def _counts(rows: list[tuple[str, int]], total: int, unit: str) -> pd.DataFrame:
    """A table of counts (filter, number of ``unit``, share of ``total``)."""
    return pd.DataFrame(
        [(name, f"{count:,}", f"{100 * count / max(total, 1):.2f}%") for name, count in rows],
        columns=["filter", unit, "share"],
    )


def render_cleaning_report(report_tsv: str | Path, html_path: str | Path, title: str, settings: dict[str, Any]) -> None:
    """The cleaning report of a training corpus (:func:`nmt.data.cleaning.write_report`) as a page: the pairs each
    filter dropped, in the order the filters run, and the pairs kept, then the corpus's cleaning settings.

    :param settings: the cleaning settings the corpus was cleaned with (the global block and its own overrides)
    """
    path = Path(report_tsv)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    df = pd.read_csv(path, sep="\t")
    if list(df.columns) != ["filter", "pairs", "share"]:
        raise DataError(f"{path}: expected columns filter, pairs, share, found {', '.join(map(str, df.columns))}")
    total = int(df.loc[df["filter"] == "lines_in", "pairs"].sum())
    rows = [(name, int(count)) for name, count in zip(df["filter"], df["pairs"], strict=True)]
    shown = [(n, c) for n, c in rows if c or n in ("lines_in", "kept")]
    settings_table = pd.DataFrame([(k, _setting(v)) for k, v in settings.items()], columns=["setting", "value"])
    notes = [f"Filters that dropped nothing are left out; {path.name} lists them all."]
    write_page(html_path, title, [("", _counts(shown, total, "pairs")), ("Settings", settings_table)], notes)


def _setting(value: Any) -> str:
    """A setting as the config writes it (``true``, ``null``, ``0.9``)."""
    return json.dumps(value) if not isinstance(value, str) else value


def render_mono_report(report_json: str | Path, html_path: str | Path, title: str) -> None:
    """The report of :func:`nmt.data.cleaning.clean_monolingual` as a page: the sentences read, those each filter
    dropped, and the sample kept."""
    report = read_json(report_json)
    try:
        rows = [("lines_in", report["lines_in"]), *report["dropped"].items(), ("kept", report["kept"])]
        inputs = report["inputs"]
    except (KeyError, AttributeError) as e:
        raise DataError(f"{report_json}: not a monolingual cleaning report (no {e})") from e
    shown = [(n, c) for n, c in rows if c or n in ("lines_in", "kept")]
    notes = ["Read from: " + ", ".join(map(str, inputs)), "Filters that dropped nothing are left out."]
    write_page(html_path, title, [("", _counts(shown, report["lines_in"], "sentences"))], notes)


def render_synthetic_report(report_json: str | Path, html_path: str | Path, title: str) -> None:
    """The report of :func:`nmt.data.synthetic.build_synthetic_corpus` as a page: the mixture (real pairs
    and how often they are repeated, synthetic pairs), and what the filters did to the synthetic pairs."""
    report = read_json(report_json)
    try:
        real, upsample, synthetic = report["real_pairs"], report["upsample_real"], report["synthetic_pairs"]
        synthetic_in, dropped, tagged = report["synthetic_in"], report["dropped"], report["tagged"]
    except KeyError as e:
        raise DataError(f"{report_json}: not a back-translation report (no {e})") from e
    lines = real * upsample + synthetic
    parts = [
        ("real pairs", real, upsample),
        ("synthetic pairs (tagged)" if tagged else "synthetic pairs", synthetic, 1),
    ]
    mixture = pd.DataFrame(
        [(part, f"{n:,}", f"×{times}", f"{n * times:,}", f"{100 * n * times / lines:.1f}%") for part, n, times in parts]
        + [("training corpus", "", "", f"{lines:,}", "100.0%")],
        columns=["part", "pairs", "repeated", "lines", "share"],
    )
    rows = [("synthetic_in", synthetic_in), *dropped.items(), ("kept", synthetic)]
    filters = _counts([(n, c) for n, c in rows if c or n in ("synthetic_in", "kept")], synthetic_in, "pairs")
    notes = ["Filters that dropped nothing are left out; shares of the synthetic pairs read (synthetic_in)."]
    write_page(html_path, title, [("Training corpus", mixture), ("Synthetic pairs", filters)], notes)
