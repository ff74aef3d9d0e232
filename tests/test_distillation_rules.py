"""The distillation rules of the real Snakefile: the teacher's parts sample with their own seeds, and the timing
of the distillation table's rows holds every core."""

import json
import re
import subprocess
import sys

import yaml
from conftest import REPO

TINY = REPO / "tests" / "integration"

# The search each part's job gets (the params of distill_part and backtranslate_part), from the parsed workflow:
# printed as JSON by a Python process that loads it.
PART_SEARCH = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.iocontainers import Wildcards
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(ResourceSettings(), ConfigSettings(), snakefile=Path(sys.argv[1]), workdir=Path("."))
    rules = {rule.name: rule for rule in workflow._workflow.rules}
    parts = ("0000", "0001", "0002")
    wildcards = [Wildcards(fromdict=dict(src="en", trg="de", variant="bt_sample_tagged", part=part)) for part in parts]
    print(json.dumps({name: [rules[name].params.decoding(w) for w in wildcards]
                      for name in ("distill_part", "backtranslate_part")}))
"""


def part_searches(tmp_path, generation: dict) -> dict[str, list[dict]]:
    """Rule -> the search of parts 0000, 0001 and 0002, with the tiny config's distillation.generation set."""
    config = yaml.safe_load((TINY / "config.yaml").read_text())
    config["distillation"]["generation"] = generation
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [sys.executable, "-c", PART_SEARCH, str(REPO / "Snakefile")], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_each_part_of_the_teacher_samples_with_its_own_seed(tmp_path):
    """As back-translation's parts do: the generation's seed plus the part's number. With one seed for all, every
    part of a corpus cut in parts would draw from the same random stream."""
    searches = part_searches(tmp_path, {"method": "sample", "sampling_topk": 5, "seed": 7})
    assert [search["seed"] for search in searches["distill_part"]] == [7, 8, 9]
    assert [search["seed"] for search in searches["backtranslate_part"]] == [1, 2, 3]  # its variant's seed is 1
    assert {search["method"] for search in searches["distill_part"]} == {"sample"}


def test_beam_parts_keep_the_one_seed(tmp_path):
    """Beam search draws nothing: every part keeps the generation's one seed."""
    searches = part_searches(tmp_path, {"beam_size": 2, "seed": 7})
    assert [search["seed"] for search in searches["distill_part"]] == [7, 7, 7]


def test_the_timing_job_asks_for_every_core(tmp_path):
    """Snakemake starts a job only when its threads are free: the timing job, holding all --cores, runs alone."""
    (tmp_path / "config.yaml").write_text((TINY / "config.yaml").read_text())
    snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
    snakemake += ["--directory", str(tmp_path)]
    for cores in (3, 1):
        out = subprocess.run([*snakemake, "-n", "--cores", str(cores)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        job = re.search(r"^rule time_distillation:\n((?:    .*\n)+)", out.stdout, flags=re.M)
        assert job, out.stdout[-3000:]
        threads = re.search(r"^    threads: (\d+)$", job.group(1), flags=re.M)
        assert int(threads.group(1) if threads else 1) == cores
