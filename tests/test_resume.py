"""Resume: the Assistant's state survives fairseq checkpoints, also across tasks."""

import re
import shutil

import numpy as np
import pytest
import torch
from fairseq.data import data_utils

from utils import RANDOM_SKIP, log_records, read_trace, run, train_args


def _saved(save_dir):
    state = torch.load(save_dir / "checkpoint_last.pt", weights_only=False)
    return state["extra_state"]["train_iterator"]


def _last_epoch_value(output, key, epoch=""):
    return float(re.findall(rf"\| train \| epoch {epoch}.*\| {key} ([0-9.e+]+)", output)[-1])


def test_mid_epoch_resume_trains_exactly_the_uninterrupted_plan(train_data, random_skip_run,
                                                               tmp_path):
    """Stopped at the end of epoch 1, then in the middle of epoch 2, and resumed each time,
    the run trains the same batches in the same order as without the interruptions: no pair
    repeated, none dropped; the Assistant goes on from the state it saved, and the run's
    cumulative counters from the checkpoint's totals."""
    # the uninterrupted run (--max-epoch 3): the first 3 epochs of conftest's random_skip_run
    whole_out = random_skip_run.stdout
    expected = [row for row in read_trace(random_skip_run.trace) if row[0] <= 3]
    epoch1 = sum(1 for e, _, _ in expected if e == 1)
    stop = epoch1 + 11  # in the middle of epoch 2
    part = train_args(train_data, tmp_path / "part", extra=[
        "--max-epoch", "3", "--assistant-trace-dir", tmp_path / "trace-part", *RANDOM_SKIP])
    run(part + ["--max-epoch", "1"])  # an end-of-epoch checkpoint: fairseq resets its meters
    assert _saved(tmp_path / "part")["iterations_in_epoch"] == 0
    run(part + ["--max-update", str(stop)])
    itr = _saved(tmp_path / "part")
    assert itr["epoch"] == 2 and itr["iterations_in_epoch"] == 11
    assert len(itr["autoassist"]["ranks"][0]["stream"]["pending"]) > 0
    saved = itr["autoassist"]["ranks"][0]
    stats, weights = saved["assistant"]["schedule"], saved["assistant"]["model"]["theta"]
    assert "stats" not in saved and stats["num_batches"] > 0 and weights.abs().sum() > 0
    proc = run(part)
    out = proc.stdout + proc.stderr
    assert "resuming epoch 2 at batch 11/" in out
    m = re.search(r"restored Assistant state: T_k=(\S+) lambda_k=(\S+) accuracy=(\S+) "
                  r"after (\d+) loss batches", out)
    assert m, out[-3000:]
    assert float(m.group(1)) == pytest.approx(stats["threshold"], abs=1e-6)
    assert float(m.group(2)) == pytest.approx(stats["lam"], abs=1e-6)
    assert float(m.group(3)) == pytest.approx(stats["accuracy"], abs=1e-6)
    assert int(m.group(4)) == stats["num_batches"]
    assert "epoch 003" in out
    # the run's cumulative counters go on from each checkpoint, each token counted once
    for key in ("aa_boss_tok", "aa_skip_tok"):
        assert _last_epoch_value(out, key) == pytest.approx(
            _last_epoch_value(whole_out, key, epoch="003"), abs=2), key
    got = read_trace(tmp_path / "trace-part")
    assert [ids for _, _, ids in got] == [ids for _, _, ids in expected]
    assert [(e, u) for e, u, _ in got] == [(e, u) for e, u, _ in expected]
    # skipping: a pass trains 60% of the pairs, so later epochs are shorter than the first
    assert sum(1 for e, _, _ in expected if e == 3) < 0.8 * epoch1


def test_sharded_data_keeps_the_assistant(train_data, tmp_path):
    """``--data a:b`` loads another shard each epoch: the Assistant and the run's cumulative
    counters carry over."""
    shard = tmp_path / "shard2"
    shutil.copytree(train_data, shard)
    proc = run(train_args(f"{train_data}:{shard}", tmp_path / "ck", extra=[
        "--max-epoch", "2", "--assistant-trace-dir", tmp_path / "trace"]))
    out = proc.stdout + proc.stderr
    m = re.search(r"restored Assistant state: .* after (\d+) loss batches \(from the previous data "
                  r"shard\)", out)
    assert m and int(m.group(1)) > 0, out[-3000:]
    assert "epoch 002" in out and "done training" in out
    # aa_boss_tok counts the tokens of every batch trained, over both shards (a copy: the
    # same sizes)
    datasets = [data_utils.load_indexed_dataset(str(train_data / f"train.src-tgt.{lang}"), None)
                for lang in ("src", "tgt")]
    tokens = sum(np.array(ds.sizes, np.int64) for ds in datasets)  # copied from the memory map
    trained = {e: sum(int(tokens[ids].sum()) for epoch, _, ids in read_trace(tmp_path / "trace")
                      if epoch <= e) for e in (1, 2)}
    for epoch in (1, 2):
        assert _last_epoch_value(out, "aa_boss_tok", f"00{epoch}") == trained[epoch], epoch


def _epochs(output):
    """{epoch: (num_updates, loss)} of fairseq's per-epoch train lines."""
    return {int(e): (int(u), float(loss)) for e, loss, u in re.findall(
        r"\| train \| epoch (\d+) \| loss ([0-9.]+) .*\| num_updates (\d+)", output)}


def _went_on(output, save_dir, epoch, updates):
    """The run loaded the checkpoint saved at *updates* and trained epoch *epoch* from
    there, not from a fresh model (which would also reach the epoch's number)."""
    assert f"Loaded checkpoint {save_dir}/checkpoint_last.pt (epoch {epoch} @ {updates} " \
           "updates)" in output, output[-3000:]
    trained = _epochs(output)
    assert list(trained) == [epoch], trained  # no epoch trained again from 1
    first = min(int(r["num_updates"]) for r in log_records(output))
    assert updates < first <= updates + 10 < trained[epoch][0], (updates, first, trained)
    return trained[epoch]


def test_plain_translation_checkpoints_interchange(train_data, tmp_path):
    """Each task resumes the other's checkpoint: the update count and the model go on
    (its loss keeps falling), with a new Assistant and plan where the checkpoint has none."""
    plain = [a if a != "autoassist_translation" else "translation"
             for a in train_args(train_data, tmp_path, extra=["--max-epoch", "1"])]
    i = plain.index("--assistant-window")
    del plain[i:i + 2]
    first = _epochs(run(plain).stdout)  # plain translation ...
    proc = run(train_args(train_data, tmp_path, extra=["--max-epoch", "2"]))  # ... -> AutoAssist
    output = proc.stdout + proc.stderr
    assert "no Assistant state" in output
    second = _went_on(output, tmp_path, 2, first[1][0])
    plain[plain.index("--max-epoch") + 1] = "3"
    proc = run(plain)  # AutoAssist -> plain translation
    third = _went_on(proc.stdout + proc.stderr, tmp_path, 3, second[0])
    # a fresh model would be back at the first epoch's loss
    assert third[1] < second[1] < first[1][1], (first, second, third)


def test_the_checkpoint_holds_each_pairs_losses_over_the_visits_it_trained(random_skip_run):
    """The Assistant records every trained pair's visits (the training dynamics): in the
    checkpoint, each pair's count is what the trace says it trained, but for the losses of
    the last updates that had not reached the Assistant when it saved."""
    from autoassist_fairseq.diagnose.dynamics import checkpoint_visits

    first, last, visits = checkpoint_visits(str(random_skip_run.save_dir / "checkpoint_last.pt"))
    trace = read_trace(random_skip_run.trace)
    trained = np.zeros(len(visits), dtype=np.int64)
    before_last_pass = np.zeros(len(visits), dtype=np.int64)
    final = max(row[0] for row in trace)
    for epoch, _, ids in trace:
        np.add.at(trained, ids, 1)
        if epoch < final:
            np.add.at(before_last_pass, ids, 1)
    assert (visits <= trained).all() and (visits >= before_last_pass).all()
    assert visits.sum() >= 0.9 * trained.sum() and before_last_pass.max() >= 3
    seen = visits > 0
    assert np.isfinite(first[seen]).all() and np.isnan(first[~seen]).all()
    # the Boss learns: the latest visit's loss is lower than the first for most pairs
    again = visits >= 3
    assert (last[again] < first[again]).mean() > 0.8
