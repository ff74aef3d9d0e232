"""The benchmarks on quick inputs: the toolkit comparison harness (benchmarks/compare_toolkits.py) on its
synthetic task, ours and CTranslate2 on our export; of the toy model, the search-quality report
(benchmarks/search_quality.py), the search's time by step (benchmarks/search_profile.py), the
back-translation speed (benchmarks/backtranslation_speed.py) and generation's in each runtime
(benchmarks/generation.py, and its downstream check's jobs); the WMT-scale rehearsal (benchmarks/scale.py)
on 50,000 pairs, and the kills of benchmarks/chaos.py on a quick pipeline.

The peers need their own virtual environments (downloads), so only our system runs here; the
harness's measurement, data preparation and tables are the same code for every system.
No timing is asserted.
"""

import json
import re
import shutil
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import MIRROR, REPO
from test_workflow import needs_mirror

from nmt.config_file import parse_model
from nmt.data.binarize import BinarizedData
from nmt.data.subword import load_subword
from nmt.vocab import EOS


def test_compare_toolkits_runs_ours_on_the_synthetic_task(tmp_path):
    argv = [
        sys.executable,
        str(REPO / "benchmarks" / "compare_toolkits.py"),
        "--task",
        "synthetic",
        "--systems",
        "ours",
        "ctranslate2",
        "--updates",
        "12",
        "--work",
        str(tmp_path),
        "--name",
        "t",
    ]
    out = subprocess.run([*argv, "--repeats", "1"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    table = [line for line in out.stdout.splitlines() if line.startswith("| ours |")]
    assert len(table) == 1
    cells = [c.strip() for c in table[0].strip("|").split("|")]
    assert float(cells[1]) > 0  # train tok/s
    assert "% of the machine's fp32 GEMM peak" in out.stdout
    # Equal work: CTranslate2 decodes our export with our greedy search token for token (float32).
    equal = {tuple(c.strip() for c in line.strip("|").split("|"))[:2]: line for line in out.stdout.splitlines()}
    assert ("greedy", "ctranslate2-float32") in equal and ("beam5-alpha0", "ctranslate2-int8") in equal
    runs_root = tmp_path / "runs" / "synthetic" / "t"
    path = runs_root / "results.json"
    results = json.loads(path.read_text())
    [run] = results["runs"]
    assert run["repeat"] == 0 and run["updates"] == 12
    assert run["train_seconds"] > run["update_seconds"] > 0 and run["train_rss_mb"] > 50
    assert run["beam_seconds"] > 0 and run["greedy_seconds"] > 0 and 0 <= run["bleu"] <= 100
    # The tokens counted are the target tokens with EOS of the 12 updates' batches: at most 12 x 1,024.
    assert 12 * 100 < run["train_tokens"] <= 12 * 1024
    hyps = (runs_root / "ours-u12-r1" / "test.beam.out").read_text().splitlines()
    assert len(hyps) == 200
    assert not (runs_root / "ours-u12-r1" / "translate.greedy.log").exists()
    # A second repeat, as if interrupted after its decodes were recorded but before its run (stale decodes of
    # repeat 1): the command with --repeats 2 runs the second repeat only, and its decodes replace the stale ones.
    first = results["equal_runs"]
    results["equal_runs"] = first + [{**r, "repeat": 1, "seconds": -1.0} for r in first]
    path.write_text(json.dumps(results))
    peak = ["--peak-gflops", "100"]  # the first command measured it (12 s at least): no second time
    again = subprocess.run([*argv, "--repeats", "2", *peak], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 runs done" in again.stdout and again.stdout.count("ours: training 12 updates") == 1
    rerun = json.loads(path.read_text())
    runs = rerun["runs"]
    assert runs[0] == run and [r["repeat"] for r in runs] == [0, 1] and runs[1]["updates"] == 12
    assert runs[1]["train_seconds"] > runs[1]["update_seconds"] > 0 and runs[1]["beam_seconds"] > 0
    assert len(rerun["equal_runs"]) == 2 * len(first) and all(r["seconds"] > 0 for r in rerun["equal_runs"])
    greedy = [r for r in rerun["equal_runs"] if (r["system"], r["search"]) == ("ctranslate2-float32", "greedy")]
    assert [r["repeat"] for r in greedy] == [0, 1] and all(r["identical"] >= 0.95 for r in greedy)
    # Ours decodes greedy once per repeat: the main table's greedy time is the equal-work greedy decode's.
    mine = {r["repeat"]: r["seconds"] for r in rerun["equal_runs"] if (r["system"], r["search"]) == ("ours", "greedy")}
    assert [r["greedy_seconds"] for r in runs] == [mine[0], mine[1]]


def test_the_harness_measures_a_small_process_as_small_however_large_the_harness(tmp_path):
    """Linux carries a forking process's RSS into its child's peak: the harness starts commands through a
    small launcher (toolkits/measure.py), so its own memory is not counted in theirs."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from toolkits.command import Command, run_measured
    finally:
        sys.path.pop(0)
    ballast = bytearray(b"x") * (400 << 20)  # the harness holding corpora and models: 400 MB resident
    measured = run_measured(Command([sys.executable, "-S", "-c", "pass"]), tmp_path / "pass.log")
    assert len(ballast) == 400 << 20 and 0 < measured.peak_rss_mb < 100 and measured.seconds > 0


def test_compare_toolkits_small_size_is_the_default_transformer_of_config_yaml():
    # --size small must stay the model and training that config.yaml's users get (issue 19).
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from toolkits.task import Setup, setup_of_size
    finally:
        sys.path.pop(0)
    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    model = parse_model("transformer", config["models"]["transformer"], config["training"], "models.transformer")
    setup, arch, training = setup_of_size("small", threads=2), model.config, model.training
    assert (setup.enc_layers, setup.dec_layers, setup.d_model, setup.heads, setup.ff_dim, setup.dropout) == (
        arch.enc_layers,
        arch.dec_layers,
        arch.d_model,
        arch.n_heads,
        arch.ff_dim,
        arch.dropout,
    )
    assert arch.norm == "pre" and arch.share_embeddings and arch.tie_output
    assert (setup.batch_tokens, setup.lr, setup.warmup) == (training.batch_tokens, training.lr, training.warmup_steps)
    assert (setup.label_smoothing, setup.clip_norm, setup.adam_eps) == (
        training.label_smoothing,
        training.clip_norm,
        training.adam_eps,
    )
    assert tuple(setup.adam_betas) == tuple(training.adam_betas)
    assert setup_of_size("tiny", threads=2) == Setup(threads=2)  # today's benchmark model, unchanged


def test_compare_toolkits_prepares_multi30k_from_the_mirror(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from toolkits.task import prepare_multi30k
    finally:
        sys.path.pop(0)
    task = prepare_multi30k(tmp_path, MIRROR, vocab_size=1000, dev_sentences=20)
    assert [len(task.lines(split, "src")) for split in ("train", "dev", "test")] == [29000, 20, 1000]
    vocab = task.vocab.read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 996 and "<unk>" not in vocab  # the model's pieces without its four specials
    pieces = task.pieces("test", "src").read_text(encoding="utf-8").splitlines()
    assert set(" ".join(pieces).split()) <= set(vocab) | {"<unk>"}
    assert task.decode_pieces(pieces[:3]) == task.lines("test", "src")[:3]
    # A peer on a pipeline run's pieces (benchmarks/peer_recipe.py): the given model cuts them, all of val is dev.
    given = prepare_multi30k(tmp_path, MIRROR, dev_sentences=None, spm_model=task.spm_model)
    assert given.root != task.root and len(given.lines("dev", "src")) == 1014
    assert given.vocab.read_text(encoding="utf-8") == task.vocab.read_text(encoding="utf-8")
    assert given.pieces("test", "src").read_text(encoding="utf-8").splitlines() == pieces


def test_the_harness_counts_the_cpu_time_of_a_command_and_its_children(tmp_path):
    """The peer's budget is CPU time: measure.py reports user + system time, the waited-for children's included."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from toolkits.command import Command, run_measured
    finally:
        sys.path.pop(0)
    burn = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-S', '-c', {burn!r}], check=True)"
    measured = run_measured(Command([sys.executable, "-S", "-c", child]), tmp_path / "burn.log")
    assert measured.cpu_seconds >= 0.3


def test_peer_recipe_states_transformer_tiny_as_fairseq_defines_it_with_the_papers_training():
    """fairseq 0.12's tiny_architecture over base_architecture (transformer_legacy.py), trained as Wu et al. (2021)
    train it; the benchmark's own model keeps its pre-norm options."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from toolkits.fairseq import TRANSFORMER_TINY, Recipe, _train_options
        from toolkits.task import Setup
    finally:
        sys.path.pop(0)
    argv = _train_options(TRANSFORMER_TINY)
    options = {key: value for key, value in zip(argv, [*argv[1:], None], strict=True) if key.startswith("--")}
    assert {key: options[f"--{key}"] for key in ("arch", "encoder-embed-dim", "encoder-ffn-embed-dim")} == {
        "arch": "transformer_tiny",
        "encoder-embed-dim": "64",
        "encoder-ffn-embed-dim": "64",
    }
    sizes = ("encoder-layers", "decoder-layers", "encoder-attention-heads", "decoder-attention-heads")
    assert [options[f"--{key}"] for key in sizes] == ["2", "2", "2", "2"]
    assert "--encoder-normalize-before" not in options and "--share-all-embeddings" in options
    assert [options[f"--{key}"] for key in ("attention-dropout", "activation-dropout", "dropout")] == [
        "0.0",
        "0.0",
        "0.3",
    ]
    training = ("lr", "warmup-updates", "lr-scheduler", "max-tokens", "label-smoothing", "adam-betas")
    assert [options[f"--{key}"] for key in training] == ["0.005", "2000", "inverse_sqrt", "4096", "0.1", "(0.9, 0.98)"]
    assert "--max-update" not in options  # the caller says when to stop: updates, or CPU time
    assert "--encoder-normalize-before" in _train_options(Recipe.of(Setup()))


def test_search_quality_reports_every_search_of_the_trained_model(trained_model, toy_corpus):
    model_dir, _ = trained_model
    argv = [sys.executable, str(REPO / "benchmarks" / "search_quality.py"), "--model", str(model_dir)]
    argv += ["--src", str(toy_corpus["test.en"]), "--ref", str(toy_corpus["test.de"]), "--trg-lang", "de"]
    out = subprocess.run([*argv, "--limit", "6", "--threads", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines() if line.startswith("|")]
    beams = {(r[0], r[1]): r for r in rows if r[0].startswith("beam ")}
    assert set(beams) == {(f"beam {k}", a) for k in (1, 5, 10) for a in ("0.0", "0.6", "1.0")}
    assert beams["beam 1", "0.0"][2:4] == ["0.0", "0.0"]  # beam 1 without length penalty is greedy search
    stops = {r[0]: r for r in rows if r[0] in ("exact", "first_k", "never")}
    assert set(stops) == {"exact", "first_k", "never"}
    assert stops["never"][3] == "0.0" and stops["never"][2] == stops["exact"][2]  # the exact rule loses nothing
    assert "(6 sentences)" in out.stdout and all(0 <= float(r[4]) <= 100 for r in beams.values())


@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_search_profile_times_every_step_of_the_search(trained_model, toy_corpus, method):
    model_dir, _ = trained_model
    argv = [sys.executable, str(REPO / "benchmarks" / "search_profile.py"), "--model", str(model_dir)]
    argv += ["--src", str(toy_corpus["test.en"]), "--method", method, "--batch-size", "8", "--threads", "1"]
    out = subprocess.run([*argv, "--profile"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = re.search(r"search ([\d.]+) s, (\d+) model steps ([\d.]+) s", out.stdout)
    search_s, n_steps, steps_s = float(summary[1]), int(summary[2]), float(summary[3])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines() if line.startswith("|")]
    groups = {r[0]: r for r in rows if r[0][0].isdigit()}
    assert list(groups) == ["1-15", "16-63", "64-127", "128-255", "256-383", "384+"]
    assert sum(int(r[1]) for r in groups.values()) == n_steps > 0
    assert 0 < steps_s <= search_s
    hyps_per_batch = 8 * (5 if method == "beam" else 1)  # rows of a full batch's steps
    assert all(int(r[1]) == 0 for low, r in groups.items() if int(low.split("-")[0].rstrip("+")) > hyps_per_batch)
    assert "aten::" in out.stdout and "ms per search" in out.stdout


def test_backtranslation_speed_finds_ctranslate2_greedy_equal_to_torch(trained_model, toy_corpus):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    argv = [sys.executable, str(REPO / "benchmarks" / "backtranslation_speed.py"), "--model", str(model_dir)]
    argv += ["--mono", str(toy_corpus["test.en"]), "--sentences", "40", "--threads", "1"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines())}
    assert rows["ctranslate2 fp32"][4] == "0" and rows["torch fp32"][4] == "-"
    assert float(rows["torch bf16 weights"][4]) <= 40 and "40 sentences" in out.stdout


def test_generation_benchmark_tabulates_every_runtime_of_each_job(trained_model, toy_corpus):
    """Greedy and beam back-translation and the teacher's beam search of the toy model on its 40 test sentences:
    CTranslate2 float32 writes PyTorch's lines (the shared normalization for beam)."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    model_dir, _ = trained_model
    argv = [sys.executable, str(REPO / "benchmarks" / "generation.py"), "--reverse-model", str(model_dir)]
    argv += ["--teacher-model", str(model_dir), "--mono", str(toy_corpus["test.en"]), "--sentences", "50"]
    argv += ["--threads", "1", "--jobs", "bt-greedy", "bt-beam", "teacher-beam"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    table = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    rows = {(r[0], r[1]): r for r in ([c.strip() for c in line.strip("|").split("|")] for line in table)}
    for job in ("back-translation, greedy", "back-translation, beam 5", "teacher, beam 5"):
        assert rows[job, "torch"][5] == "-" and rows[job, "ctranslate2 float32"][5] == "100.0%"
        assert float(rows[job, "ctranslate2 int8"][4]) > 0 and float(rows[job, "torch"][6]) > 0  # tok/s, RSS
    assert out.stdout.count("export of the") == 2  # one model: each weight type exported once
    assert "reverse: 40 sentences" in out.stdout


def test_generation_benchmark_plans_the_downstream_check(tmp_path):
    """The back-translation variant generated twice, float32 and int8 weights: both systems are trained."""
    argv = [sys.executable, str(REPO / "benchmarks" / "generation.py"), "--downstream", str(tmp_path)]
    argv += ["--downstream-config", str(REPO / "tests" / "integration" / "config.yaml"), "--mirror", str(MIRROR)]
    out = subprocess.run([*argv, "--downstream-variant", "bt_sample_tagged", "-n"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    generation = {name: v["generation"] for name, v in config["backtranslation"]["variants"].items()}
    assert {name: (g["runtime"], g["quantization"]) for name, g in generation.items()} == {
        "bt_float32": ("ctranslate2", "float32"),
        "bt_int8": ("ctranslate2", "int8"),
    }
    for quantization in ("float32", "int8"):
        assert f"results/en-de/transformer/bt_{quantization}/seed1/model/model.pt" in out.stdout


SAMPLED_AGENT = """
import os, subprocess, sys, threading, time
sys.path.insert(0, "benchmarks")
from scale import sample_ranks
agent, done = subprocess.Popen(["true"]), threading.Event()
sampler = threading.Thread(target=sample_ranks, args=(agent.pid, [], done))
sampler.start()
time.sleep(0.5)  # the agent has exited while the sampler samples
_, status, _ = os.wait4(agent.pid, 0)
done.set()
sampler.join()
print(os.waitstatus_to_exitcode(status))
"""


def test_scale_rehearsal_sampler_leaves_the_agent_to_its_waiter():
    """The sampler of torchrun's ranks does not reap the agent: when it did (``Popen.poll``), the rehearsal's
    ``os.wait4`` could find no child (ChildProcessError in a run of the suite)."""
    out = subprocess.run([sys.executable, "-c", SAMPLED_AGENT], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout == "0\n", out.stderr[-2000:]


def test_scale_rehearsal_binarizes_exactly_what_sentencepiece_encodes(tmp_path):
    # The small version of benchmarks/scale.py: 50,000 generated pairs through every stage.
    argv = [sys.executable, str(REPO / "benchmarks" / "scale.py"), "--pairs", "50000", "--workdir", str(tmp_path)]
    argv += ["--mirror", str(MIRROR), "--vocab-size", "8000", "--max-length", "64", "--updates", "4"]
    argv += ["--batch-tokens", "1024"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    work = tmp_path / "50000"
    results = json.loads((work / "scale.json").read_text())
    for stage in ("generate", "clean", "subword", "binarize"):
        assert results["stages"][stage]["seconds"] > 0 and results["stages"][stage]["peak_rss_mb"] > 10
        assert f"50,000 {stage}" in out.stdout
    src = (work / "raw.en").read_text(encoding="utf-8").splitlines()
    assert len(src) == 50_000 and 20 < sum(len(line.split()) for line in src) / len(src) < 35
    # The generator repeats 3% of the pairs; cleaning drops them (and a few that repeat by chance).
    assert 0.025 < results["clean"]["duplicate"] / 50_000 < 0.04

    sp = {side: load_subword(work / f"spm.{side}.model") for side in ("en", "de")}
    data = BinarizedData.open(work / "bin" / "train")
    i = dropped = 0
    with open(work / "clean.en", encoding="utf-8") as src_f, open(work / "clean.de", encoding="utf-8") as trg_f:
        for src_line, trg_line in zip(src_f, trg_f, strict=True):
            src_ids = sp["en"].encode(src_line.rstrip("\n")) + [EOS]
            trg_ids = sp["de"].encode(trg_line.rstrip("\n")) + [EOS]
            if max(len(src_ids), len(trg_ids)) > 64:
                dropped += 1
                continue
            assert data.src[i].tolist() == src_ids and data.trg[i].tolist() == trg_ids, f"pair {i}"
            i += 1
    assert 0 < dropped < 0.2 * i, "the long tail of glued sentences passes 64 subwords sometimes"
    assert data.header["pairs"] == len(data) == i == results["binarize"]["pairs"]
    assert data.header["dropped_by_length"] == dropped and results["clean"]["kept"] == i + dropped

    train = results["train"]
    assert train["updates"] == 4 and 0 < train["first_update_s"] < 300
    assert len(train["peak_mb_per_rank"]) == 2, "two training processes were sampled"
    for peak in train["peak_mb_per_rank"]:
        assert 100 < peak["RssAnon"] < 4000 and 0 < peak["RssFile"] < 4000


def test_budget_tabulates_and_plots_the_learning_curves_of_runs(trained_model, tmp_path):
    """benchmarks/budget.py --report-only: the figures of runs already trained (here the toy model's curve, twice),
    without training; the trainings themselves are `python -m nmt train` as tested elsewhere."""
    model_dir, _ = trained_model
    for name in ("a", "b"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "valid.tsv").write_text((model_dir / "valid.tsv").read_text())
    argv = [sys.executable, str(REPO / "benchmarks" / "budget.py"), "--workdir", str(tmp_path), "--report-only"]
    out = subprocess.run([*argv, "--run", "a=transformer", "--run", "b=rnn,lr=0.003"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    figures = json.loads((tmp_path / "budget.json").read_text())
    assert list(figures) == ["a", "b"] and figures["a"]["updates"] == 500
    assert figures["a"]["best_bleu"] >= figures["a"]["last_bleu"] and figures["a"]["updates_to_90"] <= 500
    assert "| a | 500 |" in out.stdout and (tmp_path / "budget.png").stat().st_size > 0
    bad = subprocess.run([*argv, "--run", "c=lstm"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().splitlines() == [
        "--run c=lstm: 'lstm' is not a model of config.yaml (transformer, rnn, convs2s)"
    ]


def import_chaos():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import chaos
    finally:
        sys.path.pop(0)
    return chaos


# Two outputs of one name (suffix, content of a reference and of another run) and whether chaos.py calls them the
# same: wall time (TIMING) is left out, nothing else.
SAME_BUT_FOR_TIME = [
    (".json", '{"bleu": 1.0, "train_seconds": 3.1}', '{"bleu": 1.0, "train_seconds": 9.0}', True),
    (".json", '{"bleu": 1.0, "valid": {"seconds": 3}}', '{"bleu": 1.5, "valid": {"seconds": 3}}', False),
    (".tsv", "step\tloss\ttokens_per_second\n10\t6.2\t900\n", "step\tloss\ttokens_per_second\n10\t6.2\t80\n", True),
    (".tsv", "step\tloss\ttokens_per_second\n10\t6.2\t900\n", "step\tloss\ttokens_per_second\n10\t6.1\t900\n", False),
    (
        ".md",
        "| bleu | train_seconds |\n|--:|--:|\n| 3.5 | 11.5 |\n",
        "| bleu | train_seconds |\n|--:|--:|\n| 3.5 | 9 |\n",
        True,
    ),
    (".md", "| bleu | train_seconds |\n| 3.5 | 11.5 |\n", "| bleu | train_seconds |\n| 3.6 | 11.5 |\n", False),
    (
        ".html",
        "<p>x</p><table><tr><th>bleu</th><th>seconds</th></tr><tr><td>1</td><td>2</td></tr></table>",
        "<p>x</p><table><tr><th>bleu</th><th>seconds</th></tr><tr><td>1</td><td>7</td></tr></table>",
        True,
    ),
    (
        ".html",
        "<p>x</p><table><tr><th>bleu</th></tr><tr><td>1</td></tr></table>",
        "<p>y</p><table><tr><th>bleu</th></tr><tr><td>1</td></tr></table>",
        False,
    ),
    (".html", '<p><img src="data:image/png;base64,iVBO"></p>', '<p><img src="data:image/png;base64,iVBP"></p>', False),
    (".de", "ein Hund\n", "ein Hund \n", False),
]


@pytest.mark.parametrize(("suffix", "ours", "theirs", "same"), SAME_BUT_FOR_TIME)
def test_chaos_compares_outputs_without_their_wall_time(tmp_path, suffix, ours, theirs, same):
    chaos = import_chaos()
    (tmp_path / f"a{suffix}").write_text(ours)
    (tmp_path / f"b{suffix}").write_text(theirs)
    assert chaos.is_same(tmp_path / f"a{suffix}", tmp_path / f"b{suffix}") == same


def test_chaos_compares_checkpoints_tensor_by_tensor(tmp_path):
    """Equal checkpoints never have equal bytes (torch names the zip records after the file); one changed element,
    or a changed dtype, differs."""
    chaos = import_chaos()
    weights = {"w": torch.arange(6.0), "progress": {"step": 4, "train_seconds": 1.5}}
    nudged = torch.arange(6.0)
    nudged[5] = nudged[5].nextafter(torch.tensor(9.0))  # the next float32
    torch.save(weights, tmp_path / "a.pt")
    torch.save({**weights, "progress": {"step": 4, "train_seconds": 7.0}}, tmp_path / "other_name.pt")
    torch.save({**weights, "w": nudged}, tmp_path / "nudged.pt")
    torch.save({**weights, "w": torch.arange(6.0).double()}, tmp_path / "double.pt")
    assert chaos.is_same(tmp_path / "a.pt", tmp_path / "other_name.pt")
    assert not chaos.is_same(tmp_path / "a.pt", tmp_path / "nudged.pt")
    assert not chaos.is_same(tmp_path / "a.pt", tmp_path / "double.pt")


@pytest.mark.slow
@needs_mirror
def test_chaos_kills_a_run_three_times_and_it_ends_as_the_uninterrupted_run(tmp_path):
    """benchmarks/chaos.py on a quick pipeline (the corpora's first 500 lines, 10 updates per training): a run whose
    Snakemake and jobs are killed (SIGKILL) three times, each time recovered with the command of docs/cluster.md,
    ends with every output equal to the uninterrupted run's."""
    chaos = import_chaos()
    config = chaos.chaos_config(max_steps=10, models=("transformer",))
    mirror = chaos.truncated_mirror(MIRROR, config, 500, tmp_path / "mirror")
    outcomes = chaos.run_chaos(tmp_path, mirror, config, runs=1, kills_per_run=3, seed=1)
    assert outcomes[0]["kills"] and all(map(chaos.is_identical, outcomes)), outcomes


def test_peer_recipe_decodes_dev_anew_for_other_weights_in_a_reused_run_directory(trained_model, toy_corpus, tmp_path):
    """A run directory reused with another --ours (the peer's training is kept) must not report the dev translation
    of the model it was first given: our dev output is kept per digest of the weights."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from peer_recipe import OurRun, decode_our_dev
        from toolkits.task import Task
    finally:
        sys.path.pop(0)
    first = trained_model[0]
    other = shutil.copytree(first, tmp_path / "other")
    checkpoint = torch.load(other / "model.pt", map_location="cpu", weights_only=False)
    checkpoint["model"] = {name: torch.zeros_like(value) for name, value in checkpoint["model"].items()}
    torch.save(checkpoint, other / "model.pt")
    task = Task("toy", toy_corpus["dev.en"].parent, "en", "de")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    hyps = [
        decode_our_dev(OurRun(model_dir, 500, 1.0, 1, model_dir / "unused"), task, 1, run_dir)
        for model_dir in (first, other)
    ]
    assert len(hyps[0]) == len(hyps[1]) == 40 and hyps[0] != hyps[1]
    assert decode_our_dev(OurRun(first, 500, 1.0, 1, first / "unused"), task, 1, run_dir) == hyps[0]
