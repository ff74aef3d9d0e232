"""Decoding's default thread count: the CPUs the process may use, or OMP_NUM_THREADS."""

import os
import subprocess
import sys

import pytest
from conftest import tiny_model

from nmt.data.subword import load_subword
from nmt.decoding.translation import decoding_threads
from nmt.model_dir import write_model

PINNABLE = hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


def without_thread_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


@pytest.mark.skipif(not PINNABLE, reason="needs sched_setaffinity and at least 2 CPUs to leave one out")
def test_default_threads_are_the_cpus_the_process_may_use(toy_spm, tmp_path):
    """A process pinned to one CPU after torch loaded (torch sized its thread pool to every CPU then) decodes on
    one thread, not on one per CPU of the machine, and says so in its log."""
    sp = load_subword(toy_spm["en"])
    model = tiny_model("transformer", sp.get_piece_size())
    write_model(tmp_path / "model", {"spec": model.spec, "model": model.state_dict()}, toy_spm["en"], toy_spm["en"])
    cpu = min(os.sched_getaffinity(0))
    code = (
        "import logging, os, torch\n"
        "logging.basicConfig(level=logging.INFO)\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "from nmt.config import DecodeConfig\n"
        "from nmt.decoding.translation import load_decoding\n"
        f"load_decoding([{str(tmp_path / 'model')!r}], DecodeConfig(method='greedy'), 'cpu')\n"
        "print(torch.get_num_threads())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=without_thread_settings(), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1"]
    assert "decoding on 1 CPU thread (the CPUs this process may use; --threads N (or OMP_NUM_THREADS)" in out.stderr


def test_threads_asked_then_omp_num_threads_then_the_cpus(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if hasattr(os, "sched_getaffinity"):
        cpus, source = len(os.sched_getaffinity(0)), "the CPUs this process may use"
    else:
        cpus, source = os.cpu_count(), "the CPUs of the machine"
    assert decoding_threads() == (cpus, source)
    assert decoding_threads(3) == (3, "asked")
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert decoding_threads() == (5, "OMP_NUM_THREADS")
    assert decoding_threads(2) == (2, "asked")
    monkeypatch.setenv("OMP_NUM_THREADS", "four")  # not a number: as if unset
    assert decoding_threads()[0] == cpus
