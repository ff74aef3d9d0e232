"""The decoding rules of the real Snakefile: a job whose runtime is CTranslate2 (runtime auto) reads its model's one
export (rule export_model) instead of exporting at start-up, and every rule that trains or generates asks for a GPU
in both cluster profiles."""

import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO
from test_workflow import planned_jobs

TINY = REPO / "tests" / "integration"

# The model files of each decoding job of the parsed workflow (its input function's answer), printed as JSON; and
# which rules train or generate (their script).
JOB_MODELS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.iocontainers import Wildcards
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

pair = dict(src="en", trg="de")
jobs = {
    "transformer test": ("translate_test", dict(model="transformer", stage="baseline", run="seed1", test="t")),
    "rnn test": ("translate_test", dict(model="rnn", stage="baseline", run="seed1", test="t")),
    "teacher part": ("distill_part", dict(part="0001")),
    "greedy part": ("backtranslate_part", dict(variant="bt_greedy", part="0001")),
    "gnmt beam part": ("backtranslate_part", dict(variant="bt_beam", part="0001")),
    "forward part": ("forward_translate_part", dict(variant="bt_greedy", round="2", part="0001")),
    "round part": ("backtranslate_round_part", dict(variant="bt_greedy", round="2", part="0001")),
}
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(ResourceSettings(), ConfigSettings(), snakefile=Path(sys.argv[1]), workdir=Path("."))
    rules = {rule.name: rule for rule in workflow._workflow.rules}
    models = {job: rules[rule].input.models(Wildcards(fromdict={**pair, **w})) for job, (rule, w) in jobs.items()}
    scripts = {rule.name: Path(rule.script).name for rule in rules.values() if rule.script}
    print(json.dumps({"models": models, "scripts": scripts}))
"""

AUTO = {
    "seeds": [1],
    "decoding": {"method": "greedy", "runtime": "auto"},
    "distillation": {"generation": {"method": "greedy", "runtime": "auto"}},
    "backtranslation": {
        "variants": {
            "bt_greedy": {"generation": {"method": "greedy", "runtime": "auto", "quantization": "int8"}},
            "bt_beam": {"generation": {"beam_size": 2, "runtime": "auto"}},
        }
    },
}


def tiny_config(tmp_path, changes: dict) -> None:
    """The tiny config in ``tmp_path`` with the sections of ``changes`` updated (one level deep)."""
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    for key, value in changes.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))


def parsed_workflow(tmp_path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", JOB_MODELS, str(REPO / "Snakefile")], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_the_ctranslate2_jobs_of_a_model_read_its_one_export(tmp_path):
    """runtime auto: the Transformer's test set and the teacher's parts read one float32 export of the model, a
    variant's parts the int8 export of each round's model; the RNN and GNMT's beam search decode model.pt in torch.
    One export_model job per export (the student's int8 export for the distillation table among them)."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install '.[export]')")
    tiny_config(tmp_path, AUTO)
    models = parsed_workflow(tmp_path)["models"]
    teacher = "results/en-de/transformer/baseline/seed1/model/ctranslate2/float32/model.bin"
    assert models["transformer test"] == models["teacher part"] == [teacher]
    assert models["rnn test"] == ["results/en-de/rnn/baseline/seed1/model/model.pt"]
    assert models["greedy part"] == ["results/en-de/backtranslation/reverse/ctranslate2/int8/model.bin"]
    assert models["gnmt beam part"] == ["results/en-de/backtranslation/reverse/model.pt"]
    rounds = "results/en-de/backtranslation/bt_greedy/round2"
    assert models["forward part"] == [f"{rounds}/forward/ctranslate2/int8/model.bin"]
    assert models["round part"] == [f"{rounds}/reverse/ctranslate2/int8/model.bin"]
    # the Transformer's 3 stages, and the student's int8 export (its test sets decode in torch: distillation.decoding)
    assert planned_jobs(tmp_path)["export_model"] == 4


def test_every_rule_that_trains_or_generates_asks_for_a_gpu_in_both_cluster_profiles(tmp_path):
    """translate_export is left out: it decodes a student's export for the distillation table, whose times are CPU
    times (time_distillation)."""
    tiny_config(tmp_path, AUTO)
    scripts = parsed_workflow(tmp_path)["scripts"]
    gpu_rules = {
        rule for rule, script in scripts.items() if script in ("translate.py", "translate_row.py", "train_model.py")
    }
    assert {"distill_part", "forward_translate_part", "backtranslate_round_part", "train_round_model"} < gpu_rules
    assert {"train_multilingual_model", "translate_multilingual", "translate_pivot"} < gpu_rules
    gpu_rules.discard("translate_export")
    for profile in ("slurm", "cluster-generic"):
        settings = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())["set-resources"]
        asked = {rule for rule, resources in settings.items() if resources.get("gpu", 0) >= 1}
        assert gpu_rules <= asked, f"profiles/{profile}: no GPU for {sorted(gpu_rules - asked)}"
