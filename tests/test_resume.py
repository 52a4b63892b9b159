"""Resume: the Assistant's state survives fairseq checkpoints, also across tasks."""

import re

import pytest
import torch

from utils import run, train_args


def _saved(save_dir):
    state = torch.load(save_dir / "checkpoint_last.pt", weights_only=False)
    return state["extra_state"]["train_iterator"]


def test_resume_restores_assistant_state(train_data, tmp_path):
    run(train_args(train_data, tmp_path, extra=["--max-epoch", "2"]))
    saved = _saved(tmp_path)["autoassist"]["ranks"][0]
    stats, weights = saved["stats"], saved["assistant"]["model"]["theta"]
    assert stats["updates"] > 0 and weights.abs().sum() > 0
    proc = run(train_args(train_data, tmp_path, extra=["--max-epoch", "3"]))
    out = proc.stdout + proc.stderr
    m = re.search(r"restored Assistant state: T_k=(\S+) lambda_k=(\S+) accuracy=(\S+) "
                  r"after (\d+) updates", out)
    assert m, out[-3000:]
    assert float(m.group(1)) == pytest.approx(stats["threshold"], abs=1e-6)
    assert float(m.group(2)) == pytest.approx(stats["lambda"], abs=1e-6)
    assert float(m.group(3)) == pytest.approx(stats["accuracy"], abs=1e-6)
    assert int(m.group(4)) == stats["updates"]
    assert "epoch 003" in out


def test_mid_epoch_resume_uses_saved_plan(train_data, tmp_path):
    run(train_args(train_data, tmp_path, extra=["--max-update", "25"]))
    itr = _saved(tmp_path)
    assert itr["iterations_in_epoch"] == 25 and itr["autoassist"]["plan"] is not None
    n = itr["autoassist"]["num_batches"]
    proc = run(train_args(train_data, tmp_path, extra=["--max-epoch", "1"]))
    out = proc.stdout + proc.stderr
    assert f"resuming epoch 1 at batch 25/{n}" in out and "with the saved batch plan" in out
    assert f"num_updates {n}" in out  # the epoch ends after exactly its agreed count


def test_plain_translation_checkpoints_interchange(train_data, tmp_path):
    plain = [a if a != "autoassist_translation" else "translation"
             for a in train_args(train_data, tmp_path, extra=["--max-epoch", "1"])]
    i = plain.index("--assistant-window")
    del plain[i:i + 2]
    run(plain)  # plain translation ...
    proc = run(train_args(train_data, tmp_path, extra=["--max-epoch", "2"]))  # ... -> AutoAssist
    assert "no Assistant state" in proc.stdout + proc.stderr
    assert "epoch 002" in proc.stdout
    plain[plain.index("--max-epoch") + 1] = "3"
    proc = run(plain)  # AutoAssist -> plain translation
    assert "epoch 003" in proc.stdout
