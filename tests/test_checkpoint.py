"""Checkpoint files: atomic writes, weights-only loading with one-line errors, kept snapshots and their average."""

import threading

import pytest
import torch
from conftest import assert_one_line

from nmt.checkpoint import (
    MODEL_KEYS,
    TRAINING_KEYS,
    average_state_dicts,
    list_snapshots,
    load_checkpoint,
    save_checkpoint,
    save_snapshot,
    snapshot_path,
)
from nmt.errors import DataError


def test_save_and_load_round_trip(tmp_path):
    """What a checkpoint may hold (tensors of any dtype, numbers, strings, lists, dicts, None) comes back
    equal through the weights-only unpickler; missing folders are made and no temp file stays behind."""
    payload = {
        "spec": {"arch": "rnn", "config": {"d_model": 8, "dropout": 0.1}, "shared_vocab": True},
        "model": {"w": torch.randn(3, 4), "half": torch.randn(2).bfloat16(), "n": torch.tensor([3, 4])},
        "progress": {"step": 7, "best": None, "lr_scale": 0.5},
        "history": [{"step": 5, "loss": 1.5, "bleu_signature": "nrefs:1|tok:13a"}],
    }
    path = tmp_path / "a" / "b" / "last.pt"
    save_checkpoint(path, payload)
    assert [p.name for p in path.parent.iterdir()] == ["last.pt"]
    loaded = load_checkpoint(path, keys=(*MODEL_KEYS, "progress", "history"))
    assert loaded["spec"] == payload["spec"] and loaded["progress"] == payload["progress"]
    assert loaded["history"] == payload["history"]
    for name, tensor in payload["model"].items():
        assert loaded["model"][name].dtype == tensor.dtype and torch.equal(loaded["model"][name], tensor)
    assert torch.load(path, weights_only=True).keys() == payload.keys()


def test_save_replaces_the_old_checkpoint(tmp_path):
    path = tmp_path / "best.pt"
    save_checkpoint(path, {"spec": {"step": 1}, "model": {}})
    save_checkpoint(path, {"spec": {"step": 2}, "model": {}})
    assert load_checkpoint(path)["spec"] == {"step": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["best.pt"]


def test_failed_save_keeps_the_old_checkpoint(tmp_path):
    """A save that fails half-way (here: a lock, which cannot be pickled) leaves the previous checkpoint whole
    and no temp file behind."""
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"spec": {"step": 1}, "model": {"w": torch.ones(2)}})
    with pytest.raises(TypeError, match="cannot pickle"):
        save_checkpoint(path, {"spec": {"step": 2}, "model": {"w": torch.zeros(2)}, "lock": threading.Lock()})
    ckpt = load_checkpoint(path)
    assert ckpt["spec"] == {"step": 1} and ckpt["model"]["w"].tolist() == [1.0, 1.0]
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # nor the half-written temp file


class NotATensor:
    """An object the weights-only unpickler refuses to build."""


def truncate(path):
    path.write_bytes(path.read_bytes()[:100])


# (case, how to make the file at path, keys asked for, expected message after "{path}: ")
BAD_CHECKPOINTS = [
    ("missing", lambda path: None, MODEL_KEYS, "checkpoint not found"),
    ("folder", lambda path: path.mkdir(), MODEL_KEYS, "is a directory, not a checkpoint"),
    (
        "truncated",
        lambda path: (save_checkpoint(path, {"spec": {}, "model": {"w": torch.ones(100)}}), truncate(path)),
        MODEL_KEYS,
        "not a readable checkpoint (",
    ),
    ("text", lambda path: path.write_text("hello\n"), MODEL_KEYS, "not a readable checkpoint ("),
    (
        "pickled object",
        lambda path: torch.save({"spec": {}, "model": NotATensor()}, path),
        MODEL_KEYS,
        "not a readable checkpoint (UnpicklingError: ",
    ),
    (
        "a tensor",
        lambda path: torch.save(torch.ones(2), path),
        MODEL_KEYS,
        "not a checkpoint of this toolkit (it holds a Tensor)",
    ),
    ("a list", lambda path: torch.save([1, 2], path), MODEL_KEYS, "not a checkpoint of this toolkit (it holds a list)"),
    (
        "no spec",
        lambda path: torch.save({"model": {}}, path),
        MODEL_KEYS,
        "not a checkpoint of this toolkit (it lacks spec)",
    ),
    (
        "model file to resume",
        lambda path: save_checkpoint(path, {"spec": {}, "model": {}}),
        TRAINING_KEYS,
        "is a final model file, not a training checkpoint (no optimizer, scaler, progress, history, train_log, rng, "
        "window, identity to resume from)",
    ),
    (
        "half a training checkpoint",
        lambda path: save_checkpoint(path, {"spec": {}, "optimizer": {}}),
        TRAINING_KEYS,
        "not a checkpoint of this toolkit (it lacks model, scaler, progress, history, train_log, rng, window, "
        "identity)",
    ),
]


@pytest.mark.parametrize(
    "make, keys, message", [case[1:] for case in BAD_CHECKPOINTS], ids=[c[0] for c in BAD_CHECKPOINTS]
)
def test_bad_checkpoint_is_one_line(tmp_path, make, keys, message):
    path = tmp_path / "last.pt"
    make(path)
    with pytest.raises(DataError) as excinfo:
        load_checkpoint(path, keys=keys)
    assert assert_one_line(excinfo, path).startswith(f"{path}: {message}")


def test_load_checks_only_the_keys_asked_for(tmp_path):
    path = tmp_path / "step10.pt"
    save_checkpoint(path, {"model": {"w": torch.ones(1)}, "step": 10})
    assert load_checkpoint(path, keys=("model",))["step"] == 10
    with pytest.raises(DataError, match="it lacks spec"):
        load_checkpoint(path)


def test_snapshots_are_listed_by_step(tmp_path):
    """Only ``step{N}.pt`` files count, in numeric order; temp files, best.pt and last.pt do not."""
    for name in ("step9.pt", "step10.pt", "step100.pt", "best.pt", "last.pt", "stepx.pt", "step.pt", "step10.pt.bak"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / ".step20.pt.tmp").write_bytes(b"")
    (tmp_path / ".step20.pt.123.tmp").write_bytes(b"")
    assert list_snapshots(tmp_path) == {s: tmp_path / f"step{s}.pt" for s in (9, 10, 100)}
    assert list(list_snapshots(tmp_path)) == [9, 10, 100]
    assert snapshot_path(tmp_path, 30) == tmp_path / "step30.pt"
    assert list_snapshots(tmp_path / "none") == {}


def weights(value: float) -> dict:
    return {"model": {"w": torch.full((2,), value)}}


@pytest.mark.parametrize(
    "before, step, keep, every, after",
    [
        ([10, 20, 30], 40, 3, 10, [20, 30, 40]),  # the oldest goes
        ([10, 20, 30], 40, 1, 10, [40]),
        ([10], 20, 5, 10, [10, 20]),  # fewer than keep: all stay
        ([10, 20], 25, 3, 10, [10, 20, 25]),  # the final state of a run, off the interval
        ([10, 20, 25], 30, 3, 10, [10, 20, 30]),  # trained further: the off-interval 25 goes
        ([10, 20, 30, 40], 20, 3, 10, [10, 20]),  # redone from step 10: the future 30 and 40 go
    ],
)
def test_save_snapshot_keeps_the_last(tmp_path, before, step, keep, every, after):
    for s in before:
        save_checkpoint(snapshot_path(tmp_path, s), weights(s))
    save_snapshot(tmp_path, step, weights(step), keep, every)
    assert list(list_snapshots(tmp_path)) == after
    assert load_checkpoint(snapshot_path(tmp_path, step), keys=("model",))["model"]["w"].tolist() == [step, step]


def test_average_is_the_float32_mean_in_the_saved_dtype(tmp_path):
    """bfloat16 weights are summed in float32 (a bfloat16 sum would round 256 + 1 to 256) and cast back."""
    values = [256.0, 1.0, 1.0, 2.0]
    paths = []
    for i, v in enumerate(values):
        paths.append(tmp_path / f"step{i}.pt")
        state = {"b": torch.full((3,), v).bfloat16(), "f": torch.full((2,), v), "n": torch.tensor([7])}
        save_checkpoint(paths[-1], {"model": state})
    average = average_state_dicts(paths)
    assert average["b"].dtype == torch.bfloat16 and average["b"].tolist() == [65.0] * 3
    assert average["f"].dtype == torch.float32 and average["f"].tolist() == [65.0] * 2
    assert average["n"].dtype == torch.int64 and average["n"].tolist() == [7]
    assert average_state_dicts(paths[:1])["f"].tolist() == [256.0, 256.0]


def test_average_refuses_what_cannot_be_averaged(tmp_path):
    a, b, c = tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "c.pt"
    save_checkpoint(a, {"model": {"w": torch.ones(2), "n": torch.tensor(1)}})
    save_checkpoint(b, {"model": {"w": torch.ones(2), "v": torch.tensor(1)}})
    save_checkpoint(c, {"model": {"w": torch.ones(2), "n": torch.tensor(2)}})
    with pytest.raises(DataError, match="^no checkpoints to average$"):
        average_state_dicts([])
    with pytest.raises(DataError) as excinfo:
        average_state_dicts([a, b])
    assert assert_one_line(excinfo, a, b).endswith("parameters differ from those of " + str(a) + ", cannot average")
    with pytest.raises(DataError) as excinfo:
        average_state_dicts([a, c])
    assert "integer tensor n differs" in assert_one_line(excinfo, a, c)
    with pytest.raises(DataError, match="it holds a list"):
        torch.save([1], b)
        average_state_dicts([a, b])
