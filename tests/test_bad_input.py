"""Every bad input of the workflow, config and cleaning side: one line naming the file or key, or a counted drop.

The table :data:`CASES` has one row per input (docs/configuration.md: "Bad input"); each row runs the real code on a
real bad file or config and checks the one line it gives.
"""

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from test_workflow import MIRROR, TINY, needs_mirror, snakemake

from nmt.atomic import remove_stale_temp_files
from nmt.config import CleanConfig, SubwordConfig, SyntheticConfig
from nmt.data.cleaning import clean_corpus, clean_monolingual
from nmt.data.download import download
from nmt.data.eval_sets import prepare_eval_set
from nmt.data.subword import train_subword
from nmt.data.synthetic import build_synthetic_corpus, split_corpus
from nmt.errors import NmtError

GERMAN = ["Ein Mädchen läuft.", "Zwei Hunde spielen.", "Der Bär schläft.", "Grüße aus Köln.", "Ein Fußball."]
ENGLISH = ["A girl runs.", "Two dogs play.", "The bear sleeps.", "Greetings from Cologne.", "A football."]


def write(path: Path, data: bytes | list[str | bytes]) -> Path:
    """Write ``data`` as it is, or its lines (str as UTF-8, bytes as they are) with ``\\n``."""
    if not isinstance(data, bytes):
        data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in data)
    path.write_bytes(data)
    return path


def clean(tmp_path: Path, de: bytes | list[str], en: bytes | list[str], **config) -> str:
    """Clean a German-English corpus; return the error, or the kept German lines and the non-zero drop counts."""
    out = tmp_path / "out"
    report = clean_corpus(
        write(tmp_path / "raw.de", de),
        write(tmp_path / "raw.en", en),
        out / "c.de",
        out / "c.en",
        out / "r.tsv",
        CleanConfig(langid=False, **config),
        "de",
        "en",
        sources=("https://example.org/raw.de", "raw.en"),
    )
    drops = ", ".join(f"{k}={v}" for k, v in report["dropped"].items() if v)
    return f"kept {(out / 'c.de').read_text().splitlines()}; dropped {drops}"


def clean_mono(tmp_path: Path, lines: bytes | list[str]) -> str:
    report = clean_monolingual(
        [write(tmp_path / "mono.de", lines)],
        tmp_path / "o.de",
        tmp_path / "r.json",
        CleanConfig(),
        "de",
        sources=["/data/news.de"],
    )
    return f"kept {report['kept']}; dropped " + ", ".join(f"{k}={v}" for k, v in report["dropped"].items() if v)


def eval_set(tmp_path: Path, de: bytes | list[str], en: list[str], name: str = "test.de") -> str:
    out = tmp_path / "out"
    src, ref = write(tmp_path / name, de), write(tmp_path / "test.en", en)
    sources = (f"https://example.org/{name}", "https://example.org/test.en")
    return str(prepare_eval_set(src, ref, out / "t.de", out / "t.en", "de", sources=sources))


def full_disk(tmp_path: Path, how: str) -> str:
    """Clean a corpus in a subprocess whose output cannot be written: ENOSPC (the temp file is a link to
    /dev/full) or EFBIG (a 10 kB file size limit, SIGXFSZ ignored as a shell's ulimit -f does not)."""
    de = write(tmp_path / "raw.de", [f"{line} {i}" for i in range(1000) for line in GERMAN[:1]])
    en = write(tmp_path / "raw.en", [f"{line} {i}" for i in range(1000) for line in ENGLISH[:1]])
    out, log = tmp_path / "out", tmp_path / "clean.log"
    out.mkdir()
    script = f"""
import os, resource, signal
from nmt.data.cleaning import clean_corpus
from nmt.config import CleanConfig
from nmt.entry import entry_point
if {how!r} == "ENOSPC":
    os.symlink("/dev/full", "{out}/.c.de.%d.tmp" % os.getpid())
else:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))
with entry_point("{log}"):
    clean_corpus("{de}", "{en}", "{out}/c.de", "{out}/c.en", "{out}/r.tsv", CleanConfig(langid=False), "de", "en")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [], "temp files and partial outputs are removed"
    errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and errors[0].endswith(proc.stderr.strip().removeprefix("error: "))
    return proc.stderr.strip()


def sha256_mismatch(tmp_path: Path) -> str:
    source = write(tmp_path / "corpus.de", GERMAN)
    return str(download(str(source), tmp_path / "dl.de", sha256="0" * 64))


def workflow(tmp_path: Path, override: dict | None = None, target: str | None = None) -> str:
    """``snakemake -n`` on the tiny config with ``override``: the one line after the profile notice."""
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    for key, value in (override or {}).items():
        config[key] = {**config[key], **value} if key in ("corpora", "models") else value
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = snakemake("-n", *([target] if target else []), "--config", f"mirror={MIRROR}", workdir=tmp_path)
    assert out.returncode == 1
    if "MissingRuleException" in out.stdout:  # Snakemake's own: no rule's wildcards match the path
        return " ".join(out.stdout.split("MissingRuleException:")[1].split())
    notice, line = out.stderr.strip().splitlines()
    assert "profiles/default" in notice, out.stderr
    return line


def workflow_text(tmp_path: Path, old: str, new: str) -> str:
    """``snakemake -n`` on the tiny config file with its text ``old`` replaced by ``new``: the one line."""
    text = (TINY / "config.yaml").read_text()
    assert old in text
    (tmp_path / "config.yaml").write_text(text.replace(old, new, 1))
    out = snakemake("-n", "--config", f"mirror={MIRROR}", workdir=tmp_path)
    assert out.returncode == 1
    notice, line = out.stderr.strip().splitlines()
    assert "profiles/default" in notice, out.stderr
    return line


def distilled_nothing(tmp_path: Path) -> str:
    """A distilled corpus of a teacher whose every translation is empty (or a copy of its source)."""
    source, hyps = write(tmp_path / "src.en", ENGLISH[:4]), write(tmp_path / "hyp.de", ["", "", "", ENGLISH[3]])
    real = [write(tmp_path / "real.en", ENGLISH)], [write(tmp_path / "real.de", GERMAN)]
    out = [tmp_path / name for name in ("train.en", "train.de", "report.json")]
    config = SyntheticConfig(upsample_real=0)
    return str(build_synthetic_corpus(*real, [hyps], [source], *out, config, generated_side="trg"))


TARGET = "results/en-de/{}/baseline/seed1/model/model.pt"
LATIN1 = b"".join(line.encode("cp1252") + b"\n" for line in GERMAN)

# id, run(tmp_path) -> the line, what the line contains
SMALL = SubwordConfig(vocab_size=12)  # fewer pieces than the corpus has characters
CASES = [
    # Cleaning: files
    (
        "latin1-corpus",
        lambda t: clean(t, LATIN1 * 4, ENGLISH * 4),
        "https://example.org/raw.de (read from {t}/raw.de): 16 of 20 lines (80.0%) are not valid UTF-8;"
        " it looks like Latin-1/cp1252",
    ),
    ("latin1-mono", lambda t: clean_mono(t, LATIN1 * 4), "/data/news.de (read from {t}/mono.de): 16 of 20 lines"),
    # Each error names the user's file as configured (URL or path), and the downloaded copy that was read.
    (
        "utf16-corpus",
        lambda t: clean(t, "\n".join(GERMAN).encode("utf-16"), ENGLISH),
        "https://example.org/raw.de (read from {t}/raw.de): looks like UTF-16",
    ),
    (
        "empty-corpus",
        lambda t: clean(t, b"", b""),
        "https://example.org/raw.de (read from {t}/raw.de): corpus is empty",
    ),
    ("empty-mono", lambda t: clean_mono(t, b""), "/data/news.de (read from {t}/mono.de): corpus is empty"),
    (
        "every-line-dropped",
        lambda t: clean(t, GERMAN, GERMAN),
        "https://example.org/raw.de (read from {t}/raw.de): all 5 lines were dropped by the filters (copy=5)",
    ),
    (
        "every-mono-line-dropped",
        lambda t: clean_mono(t, ["\x1b[31m"] * 3),
        "/data/news.de (read from {t}/mono.de): all 3 lines were dropped by the filters",
    ),
    (
        "line-count-mismatch",
        lambda t: clean(t, GERMAN, ENGLISH[:3]),
        "https://example.org/raw.de (read from {t}/raw.de) has 5 lines but raw.en (read from {t}/raw.en) has 3",
    ),
    (
        "not-gzip",
        lambda t: eval_set(t, b"\xff\x00" * 9, ENGLISH, name="test.de.gz"),
        "https://example.org/test.de.gz (read from {t}/test.de.gz): not a gzip file",
    ),
    (
        "truncated-gzip",
        lambda t: eval_set(t, gzip.compress(b"Ein Satz.\n" * 999)[:-30], ["A sentence."] * 999),
        "https://example.org/test.de (read from {t}/test.de): truncated gzip stream",
    ),
    (
        "missing-file",
        lambda t: str(prepare_eval_set(t / "nope.de", t / "nope.en", t / "a", t / "b", "de")),
        "{t}/nope.de: no such file",
    ),
    (
        "test-set-line-count-mismatch",
        lambda t: eval_set(t, GERMAN, ENGLISH[:4]),
        "https://example.org/test.de (read from {t}/test.de) has 5 lines but https://example.org/test.en (read from"
        " {t}/test.en) has 4",
    ),
    (
        "empty-test-set",
        lambda t: eval_set(t, b"", []),
        "https://example.org/test.de (read from {t}/test.de): corpus is empty",
    ),
    (
        "test-set-invalid-utf8",
        lambda t: eval_set(t, LATIN1, ENGLISH),
        "https://example.org/test.de (read from {t}/test.de): line 1 is not valid UTF-8; it looks like Latin-1/cp1252",
    ),
    ("sha256-mismatch", sha256_mismatch, "{t}/corpus.de: sha256 mismatch, expected 0000"),
    ("corpus-path-is-a-folder", lambda t: str(download(str(t), t / "dl.de")), "{t}: {t} is a directory, not a corpus"),
    (
        "vocab-size-below-the-characters",
        lambda t: train_subword([write(t / "a.de", GERMAN)], [write(t / "a.en", ENGLISH)], t / "s", t / "t", SMALL),
        "subword.vocab_size: 12 pieces cannot hold the",
    ),
    # Cleaning: counted drops and silent repairs
    (
        "few-invalid-lines",
        lambda t: clean(t, GERMAN * 4 + [b"\x81"], ENGLISH * 4 + ["x"], dedup=False),
        "dropped invalid_utf8=1",
    ),
    (
        "ansi-colour-codes",
        lambda t: clean(t, ["Ein [31mroter[0m Satz.", "Ein \x1b[1;32mgrüner Satz.", "Ein Satz [1]."], ENGLISH[:3]),
        "kept ['Ein Satz [1].']; dropped ansi_code=2",
    ),
    (
        "crlf-and-bom",
        lambda t: clean(t, b"\xef\xbb\xbfEin Satz.\r\nNoch ein Satz.\r\n", ["A sentence.", "Another."]),
        "kept ['Ein Satz.', 'Noch ein Satz.']; dropped",
    ),
    # CR-only line ends (classic Mac OS) are line ends, not one line of the whole file; a CR inside a line is not.
    (
        "cr-only-line-ends",
        lambda t: clean(t, b"Ein Satz.\rNoch ein Satz.\r", ["A sentence.", "Another."]),
        "kept ['Ein Satz.', 'Noch ein Satz.']; dropped",
    ),
    ("cr-only-mono", lambda t: clean_mono(t, "\r".join(GERMAN).encode()), "kept 5; dropped"),
    ("cr-only-gzip-test-set", lambda t: eval_set(t, gzip.compress("\r".join(GERMAN).encode()), ENGLISH), "5"),
    (
        "cr-inside-a-line",
        lambda t: clean(t, [b"Ein\rSatz.", b"Noch ein Satz."], ["A sentence.", "Another."]),
        "kept ['EinSatz.', 'Noch ein Satz.']; dropped",
    ),  # a control character, removed by the normalizer
    # Output
    ("disk-full", lambda t: full_disk(t, "ENOSPC"), "error: {t}/out/c.de, {t}/out/c.en: no space left on device"),
    (
        "file-size-limit",
        lambda t: full_disk(t, "EFBIG"),
        "error: {t}/out/c.de, {t}/out/c.en: file too large (file size limit)",
    ),
    # Config (snakemake -n)
    (
        "corpus-name-semicolon",
        lambda t: workflow(t, {"corpora": {"a;b": {"url": "x.{lang}"}}}),
        "config error: key 'corpora': 'a;b' does not match",
    ),
    (
        "corpus-name-dotdot",
        lambda t: workflow(t, {"corpora": {"a..b": {"url": "x.{lang}"}}}),
        "config error: key 'corpora': 'a..b' does not match",
    ),
    (
        "corpus-name-slash",
        lambda t: workflow(t, {"corpora": {"../x": {"url": "x.{lang}"}}}),
        "config error: key 'corpora': '../x' does not match",
    ),
    (
        "negative-layers",
        lambda t: workflow(t, {"models": {"transformer": {"arch": "transformer", "enc_layers": -2}}}),
        "config error: key 'models.transformer.enc_layers': -2 is less than the minimum of 1",
    ),
    (
        "heads-do-not-divide",
        lambda t: workflow(t, {"models": {"t": {"arch": "transformer", "n_heads": 3}}}),
        "config error: models.t.n_heads: d_model 256 is not divisible by n_heads 3",
    ),
    (
        "dropout-above-1",
        lambda t: workflow(t, {"models": {"r": {"arch": "rnn", "dropout": 1.5}}}),
        "config error: key 'models.r.dropout': 1.5 is greater than or equal to the maximum of 1",
    ),
    (
        "even-kernel",
        lambda t: workflow(t, {"models": {"c": {"arch": "convs2s", "kernel_size": [4]}}}),
        "config error: models.c.kernel_size: must be odd",
    ),
    (
        "wrong-type",
        lambda t: workflow(t, {"training": {"batch_tokens": "big"}}),
        "config error: key 'training.batch_tokens': 'big' is not of type 'integer'",
    ),
    (
        "test-set-as-training-data",
        lambda t: workflow(
            t,
            {
                "data": {
                    "train": ["multi30k_train", "test_2016_flickr"],
                    "dev": "multi30k_val",
                    "test": ["test_2016_flickr"],
                }
            },
        ),
        "config error: data.train: corpus 'test_2016_flickr' is also a dev/test set",
    ),
    (
        "pair-into-itself",
        lambda t: workflow(t, {"pairs": ["en-en"]}),
        "config error: pairs: 'en-en' translates a language into itself",
    ),
    (
        "bad-language-code",
        lambda t: workflow(t, {"pairs": ["english-de"]}),
        "config error: key 'pairs.0': 'english-de' does not match",
    ),
    (
        "tsv-column-missing",
        lambda t: workflow(t, {"corpora": {"multi30k_val": {"url": "v.tsv", "tsv_columns": {"en": 0}}}}),
        "config error: corpora.multi30k_val.tsv_columns: no column for 'de' (needed by pair en-de)",
    ),
    (
        "bad-sha256",
        lambda t: workflow(t, {"corpora": {"multi30k_val": {"url": "v.{lang}", "sha256": {"de": "abc"}}}}),
        "config error: key 'corpora.multi30k_val.sha256.de': 'abc' does not match",
    ),
    (
        "config-tab",
        lambda t: workflow_text(t, "  vocab_size: 300", "\tvocab_size: 300"),
        "config error: config.yaml, line 37, column 1: found character '\\t' that cannot start any token"
        " (YAML indents with spaces; replace the tab)",
    ),
    (
        "config-bad-indent",
        lambda t: workflow_text(t, "  lr: 0.002\n", "  lr: 0.002\n   warmup_steps: 5\n"),
        "config error: config.yaml, line 69, column 16: mapping values are not allowed here",
    ),
    # Distillation: a teacher the run does not train, a student CTranslate2 cannot run, nothing to distill
    (
        "distill-unknown-teacher",
        lambda t: workflow(t, {"distillation": {"teacher": "nosuch", "students": ["student"]}}),
        "config error: distillation.teacher: 'nosuch' is not a key of models (defined: convs2s, rnn, student,",
    ),
    (
        "distill-untrained-teacher",
        lambda t: workflow(
            t, {"distillation": {"teacher": "rnn", "teacher_stage": "bt_beam", "students": ["student"]}}
        ),
        "config error: distillation.teacher_stage: 'rnn' is not trained on stage 'bt_beam' (its stages: baseline;",
    ),
    (
        "distill-student-cannot-export",
        lambda t: workflow(t, {"distillation": {"students": ["rnn"]}}),
        "config error: distillation.students: 'rnn' is a rnn, which cannot be exported to CTranslate2",
    ),
    (
        "distill-empty-source",
        lambda t: str(split_corpus([write(t / "train.en", b"")], t / "parts", 10, "en")),
        "{t}/train.en: nothing to split, the file is empty",
    ),
    ("distilled-corpus-empty", distilled_nothing, "{t}/hyp.de: no synthetic pair is left after the filters (empty=3,"),
    # Targets the config does not define (snakemake -n TARGET)
    (
        "unknown-model",
        lambda t: workflow(t, target=TARGET.format("nosuch")),
        "error: 'nosuch' is not defined under models in the config (defined: convs2s, rnn, student, transformer)",
    ),
    (
        "unknown-pair",
        lambda t: workflow(t, target=TARGET.replace("en-de", "de-en").format("rnn")),
        "error: 'de-en' is not defined under pairs in the config (defined: en-de)",
    ),
    # A language that no pair has (fr) names the pair too, for a model and for the data before it.
    (
        "unknown-pair-language",
        lambda t: workflow(t, target=TARGET.replace("en-de", "en-fr").format("transformer")),
        "error: 'en-fr' is not defined under pairs in the config (defined: en-de)",
    ),
    (
        "unknown-pair-eval-set",
        lambda t: workflow(t, target="results/fr-de/data/eval/multi30k_val.de"),
        "error: 'fr-de' is not defined under pairs in the config (defined: en-de)",
    ),
    (
        "unknown-corpus",
        lambda t: workflow(t, target="results/data/download/nosuch.en"),
        "error: 'nosuch' is not defined under corpora in the config (defined: multi30k_mono1,",
    ),
    (
        "unknown-seed",
        lambda t: workflow(t, target=TARGET.format("rnn").replace("seed1", "seed7")),
        "No rule to produce results/en-de/rnn/baseline/seed7/model/model.pt",
    ),
    (
        "unknown-variant",
        lambda t: workflow(t, target=TARGET.format("rnn").replace("baseline", "bt_nosuch")),
        "No rule to produce results/en-de/rnn/bt_nosuch/seed1/model/model.pt",
    ),
]


@pytest.mark.parametrize("run, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_bad_input_gives_one_line(tmp_path, run, expected):
    try:
        line = run(tmp_path)
    except NmtError as e:
        line = str(e)
    assert "\n" not in line and "Traceback" not in line
    assert expected.format(t=tmp_path) in line


def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    """A temp file of a killed writer (kill -9) goes at the next run; a live writer's, or a fresh one, stays."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    folder = tmp_path / "results/en-de/data/clean"
    folder.mkdir(parents=True)
    stale = write(folder / f".train.de.{dead_pid}.tmp", ["half"])
    live = write(folder / f".train.en.{os.getpid()}.tmp", ["half"])
    fresh = write(folder / f".report.tsv.{dead_pid}.tmp", ["half"])  # maybe a writer on another node
    other = write(folder / "notes.tmp", ["mine"])
    hour_ago = time.time() - 3600
    for path in (stale, live, other):
        os.utime(path, (hour_ago, hour_ago))
    assert remove_stale_temp_files(tmp_path / "results") == [stale]
    assert not stale.exists() and live.exists() and fresh.exists() and other.exists()
    assert remove_stale_temp_files(tmp_path / "nothing") == []


@needs_mirror
def test_next_run_removes_stale_temp_files(tmp_path):
    """The real Snakefile's onstart: a run after a kill -9 starts without the old temp files."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "results/data/download").mkdir(parents=True)
    stale = write(tmp_path / f"results/data/download/.multi30k_val.de.{int(dead.stdout)}.tmp", ["half"])
    os.utime(stale, (time.time() - 3600,) * 2)
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    out = snakemake(
        "--cores", "1", "results/data/download/multi30k_val.de", "--config", f"mirror={MIRROR}", workdir=tmp_path
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert not stale.exists() and (tmp_path / "results/data/download/multi30k_val.de").exists()


def test_a_jobs_warnings_reach_stderr_and_its_log_its_errors_stderr_once(tmp_path):
    """Snakemake shows a job's stderr, not its log: a warning (an evaluation set's empty lines) goes to both."""
    src, ref = write(tmp_path / "dev.de", ["Ein Hund.", ""]), write(tmp_path / "dev.en", ["A dog.", "A cat."])
    log = tmp_path / "job.log"
    code = (
        "from nmt.data.eval_sets import prepare_eval_set\n"
        "from nmt.entry import entry_point\n"
        f"with entry_point({str(log)!r}):\n"
        f"    prepare_eval_set({str(src)!r}, {str(ref)!r}, {str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r}, 'de')\n"
        f"    prepare_eval_set({str(src)!r}, {str(src)!r}, {str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r}, 'de')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    warning = f"warning: {src}: 1 of 2 lines empty (line 2), kept and scored as they are"
    assert out.stderr.splitlines()[0].startswith(warning) and len(out.stderr.splitlines()) == 3, out.stderr
    assert log.read_text().count(" WARNING ") == 3 and " INFO " in log.read_text()


def test_full_disk_outside_the_atomic_writers_is_one_line_in_the_log(tmp_path):
    """A writer outside nmt.atomic (torch.save, sentencepiece, plots) hitting a full disk: one line, no traceback."""
    log = tmp_path / "job.log"
    code = (
        "from nmt.entry import entry_point\n"
        f"with entry_point({str(log)!r}):\n"
        "    with open('/dev/full', 'wb') as f:\n"
        "        f.write(b'x' * 1_000_000)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 1
    assert out.stderr == "error: no space left on device (writing the job's outputs)\n"
    assert "no space left on device" in log.read_text() and "Traceback" not in log.read_text()
